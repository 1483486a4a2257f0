/**
 * The fetch every upstream is given (model providers, MCP servers): HTTP/1.1 over node:http and node:https
 * with kept-alive connections, the response body a web stream fed straight
 * from the socket. Beside the fetch built into Node it reaches the first byte
 * of an answer in about three quarters of the time, and it tells the caller
 * of each byte (the activity its stall timeout watches) without another
 * stream stage. Anything it does not speak (a Request object, a body other
 * than text or bytes) goes to the built-in fetch.
 */
import type { Agent as HttpAgent, ClientRequest, IncomingMessage } from 'node:http';

/** What a call wants to hear of its request: that it left, and each time bytes came back. */
export interface FetchWatch {
  sent?: () => void;
  heard: () => void;
}

const http = process.getBuiltinModule('node:http');
let agents: { http: HttpAgent; https: HttpAgent } | undefined;
/** The kept-alive agent of a protocol, shared by every upstream call. */
export const agentFor = (protocol: string): HttpAgent => {
  agents ??= {
    http: new http.Agent({ keepAlive: true }),
    https: new (process.getBuiltinModule('node:https').Agent)({ keepAlive: true }),
  };
  return protocol === 'https:' ? agents.https : agents.http;
};

/** How fetch fails to connect: a TypeError with the socket's error as its cause (clients, the AI SDK among them, look for it). */
export const fetchFailed = (cause: unknown): TypeError => Object.assign(new TypeError('fetch failed'), { cause });
const abortReason = (signal: AbortSignal) => signal.reason ?? new DOMException('This operation was aborted', 'AbortError');
const NO_BODY = new Set([101, 204, 205, 304]);

export function upstreamFetch(input: string | URL | Request, init: RequestInit | undefined, watch: FetchWatch | undefined): Promise<Response> {
  const body = init?.body;
  const plainBody = body === undefined || body === null || typeof body === 'string' || body instanceof Uint8Array;
  if (input instanceof Request || !plainBody) {
    const answer = fetch(input, init);
    watch?.sent?.();
    return answer;
  }
  const url = new URL(input);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return Promise.reject(fetchFailed(new Error(`unsupported protocol ${url.protocol}`)));
  const signal = init?.signal ?? undefined;
  if (signal?.aborted) return Promise.reject(abortReason(signal));

  const headers: Record<string, string> = {};
  const given = init?.headers;
  if (given && !(given instanceof Headers) && !Array.isArray(given)) {
    // A plain record, as the model SDK passes: copied without building a Headers object (node:http checks names and values).
    for (const [name, value] of Object.entries(given as Record<string, string | undefined>)) {
      if (value !== undefined) headers[name.toLowerCase()] = String(value).trim();
    }
  } else {
    new Headers(given).forEach((value, name) => {
      headers[name] = value;
    });
  }
  if (typeof body === 'string' || body instanceof Uint8Array) headers['content-length'] = String(typeof body === 'string' ? Buffer.byteLength(body) : body.byteLength);

  return new Promise<Response>((resolve, reject) => {
    let request: ClientRequest | undefined;
    let response: IncomingMessage | undefined;
    let fail: ((error: unknown) => void) | undefined;
    const onAbort = () => {
      const reason = abortReason(signal!);
      if (fail) fail(reason);
      else reject(reason);
      request?.destroy();
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    const done = () => signal?.removeEventListener('abort', onAbort);

    request = (url.protocol === 'https:' ? process.getBuiltinModule('node:https') : http).request(url, {
      method: init?.method ?? 'GET', headers, agent: agentFor(url.protocol),
    }, (incoming) => {
      response = incoming;
      watch?.heard();
      const responseHeaders = new Headers();
      const raw = incoming.rawHeaders;
      for (let i = 0; i < raw.length; i += 2) responseHeaders.append(raw[i]!, raw[i + 1]!);
      const status = incoming.statusCode ?? 502;
      if (NO_BODY.has(status) || init?.method === 'HEAD') {
        incoming.resume();
        done();
        resolve(new Response(null, { status, statusText: incoming.statusMessage, headers: responseHeaders }));
        return;
      }
      let settled = false;
      const stream = new ReadableStream<Uint8Array>({
        start(controller) {
          fail = (error) => {
            if (settled) return;
            settled = true;
            done();
            controller.error(error);
          };
          incoming.on('data', (chunk: Buffer) => {
            watch?.heard();
            controller.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
            if ((controller.desiredSize ?? 1) <= 0) incoming.pause();
          });
          incoming.once('end', () => {
            if (settled) return;
            settled = true;
            done();
            controller.close();
          });
          // A connection dropped mid-answer, as the built-in fetch reports it.
          incoming.once('close', () => {
            if (!incoming.complete) fail!(Object.assign(new TypeError('terminated'), { cause: new Error('the upstream closed the connection mid-answer') }));
          });
          incoming.once('error', (error) => fail!(Object.assign(new TypeError('terminated'), { cause: error })));
        },
        pull() {
          incoming.resume();
        },
        cancel() {
          settled = true;
          done();
          incoming.destroy();
        },
      }, { highWaterMark: 16 });
      resolve(new Response(stream, { status, statusText: incoming.statusMessage, headers: responseHeaders }));
    });
    request.once('error', (error) => {
      if (signal?.aborted) return;
      done();
      if (response) fail?.(Object.assign(new TypeError('terminated'), { cause: error }));
      else reject(fetchFailed(error));
    });
    request.end(body === null || body === undefined ? undefined : body);
    watch?.sent?.();
  });
}
