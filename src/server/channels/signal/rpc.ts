/**
 * signal-cli's HTTP daemon (`signal-cli daemon --http`), as its manual
 * (signal-cli-jsonrpc(5)) describes it: JSON-RPC 2.0 requests posted to
 * /api/v1/rpc, received messages as server-sent events on /api/v1/events,
 * and GET /api/v1/check. Over node:http and node:https, as the Matrix
 * client does (Node's fetch would load undici, some 17 MB of an idle daemon).
 * signal-cli's HTTP endpoint has no authentication of its own: it is reached
 * over plain http only on this host.
 */
import type { IncomingMessage } from 'node:http';
import { isLoopbackAddress } from '../../../shared/config/exposure.ts';
import { agentFor } from '../../kernel/upstream-fetch.ts';
import { readIncoming } from '../attachments.ts';

/** Where signal-cli's daemon listens by default (its --http without an address). */
export const DEFAULT_RPC_URL = 'http://127.0.0.1:8080';
/** The most of one JSON-RPC answer read (a file fetched with getAttachment is its base64 in the answer). */
const MAX_ANSWER_BYTES = 16 * 1024 * 1024;
/** How long a call waits for its answer unless it says otherwise. */
const CALL_TIMEOUT_MS = 30_000;
/** The most of one event read from the stream; a larger one is skipped. */
const MAX_EVENT_BYTES = 4 * 1024 * 1024;

/** A setting that cannot work (an address signal-cli cannot be reached at safely). */
export class SignalSetup extends Error {}

/** signal-cli answered a call with a JSON-RPC error: its code (-1 a user error, -5 a rate limit, -32601 no such method...), message and data. */
export class SignalRpcError extends Error {
  readonly code: number;
  readonly data: unknown;

  constructor(code: number, message: string, data: unknown) {
    super(message);
    this.name = 'SignalRpcError';
    this.code = code;
    this.data = data;
  }
}

/** signal-cli's HTTP server answered something that is not a JSON-RPC answer (a 4xx or 5xx, or not JSON). */
export class SignalHttpError extends Error {
  readonly status: number;

  constructor(status: number, message: string) {
    super(message);
    this.name = 'SignalHttpError';
    this.status = status;
  }
}

/** Where the daemon is: https anywhere, http only on this host (what it carries would cross the network in the clear, to anyone). */
export function rpcUrlOf(address: string | undefined): URL {
  const url = new URL(address ?? DEFAULT_RPC_URL);
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new SignalSetup(`rpcUrl must be an http:// or https:// address (got ${url.protocol})`);
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (url.protocol === 'http:' && !isLoopbackAddress(host)) {
    throw new SignalSetup('rpcUrl must be on this host (http://127.0.0.1:<port>) or an https:// address: signal-cli\'s HTTP daemon asks for no credential, and over plain http every message would cross the network in the clear');
  }
  // A daemon behind a proxy under a path: its endpoints are below that path.
  if (!url.pathname.endsWith('/')) url.pathname += '/';
  url.search = '';
  url.hash = '';
  return url;
}

interface Answer { status: number; body: Buffer }

/** One request, its answer read whole up to `maxBytes`; a connection closed before the answer's end is an error. */
function request(url: URL, body: string, signal: AbortSignal, maxBytes: number): Promise<Answer> {
  const http = process.getBuiltinModule(url.protocol === 'https:' ? 'node:https' : 'node:http') as typeof import('node:http');
  return new Promise((resolve, reject) => {
    const sent = http.request(url, {
      method: 'POST', agent: agentFor(url.protocol), signal,
      headers: { accept: 'application/json', 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) },
    }, (response) => {
      readIncoming(response, maxBytes, 'signal-cli closed the connection before its answer ended').then((answer) => resolve({ status: response.statusCode ?? 0, body: answer }), reject);
    });
    sent.on('error', reject);
    sent.end(body);
  });
}

/** One server-sent event: its type ("receive") and its data. */
export interface StreamEvent { event: string; data: string }

/** signal-cli's daemon at one address. */
export class SignalDaemon {
  readonly url: URL;
  private serial = 0;

  constructor(url: URL) {
    this.url = url;
  }

  /** Calls a method; a JSON-RPC error is a SignalRpcError, anything else a SignalHttpError or the connection's own error. */
  async call<T>(method: string, params: Record<string, unknown>, options: { signal?: AbortSignal; timeoutMs?: number; maxBytes?: number } = {}): Promise<T> {
    const id = ++this.serial;
    const timeout = AbortSignal.timeout(options.timeoutMs ?? CALL_TIMEOUT_MS);
    const answer = await request(new URL('api/v1/rpc', this.url), JSON.stringify({ jsonrpc: '2.0', method, params, id }),
      options.signal ? AbortSignal.any([options.signal, timeout]) : timeout, options.maxBytes ?? MAX_ANSWER_BYTES);
    if (answer.status === 421) throw new SignalHttpError(421, `signal-cli answers only at the address it listens on (its --http): set rpcUrl to that address, not ${this.url.host}`);
    if (answer.status !== 200) throw new SignalHttpError(answer.status, `signal-cli answered HTTP ${answer.status} to ${method}`);
    let payload: unknown;
    try {
      payload = JSON.parse(answer.body.toString('utf8'));
    } catch {
      throw new SignalHttpError(200, `signal-cli's answer to ${method} is not JSON`);
    }
    if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) throw new SignalHttpError(200, `signal-cli's answer to ${method} is not a JSON-RPC answer`);
    const { error, result } = payload as { error?: { code?: unknown; message?: unknown; data?: unknown }; result?: unknown };
    if (error !== undefined && error !== null) {
      throw new SignalRpcError(typeof error.code === 'number' ? error.code : 0, typeof error.message === 'string' ? error.message.slice(0, 500) : `${method} failed`, error.data);
    }
    return result as T;
  }

  /**
   * The event stream (GET /api/v1/events), one event at a time: the next is
   * read only once the caller asks for it, so what signal-cli sends waits in
   * the connection meanwhile. signal-cli writes a keep-alive every 15 s: a
   * stream quiet for `quietMs` is taken for dead, and ends with an error.
   */
  async *events(account: string | undefined, signal: AbortSignal, quietMs: number): AsyncGenerator<StreamEvent> {
    const url = new URL('api/v1/events', this.url);
    if (account) url.searchParams.set('account', account);
    const http = process.getBuiltinModule(url.protocol === 'https:' ? 'node:https' : 'node:http') as typeof import('node:http');
    const response = await new Promise<IncomingMessage>((resolve, reject) => {
      // A connection of its own: held as long as the stream lasts, never one the calls share.
      const sent = http.request(url, { method: 'GET', agent: false, signal, headers: { accept: 'text/event-stream' } }, resolve);
      sent.on('error', reject);
      sent.end();
    });
    if (response.statusCode !== 200) {
      response.resume();
      throw new SignalHttpError(response.statusCode ?? 0, response.statusCode === 421
        ? `signal-cli answers only at the address it listens on (its --http): set rpcUrl to that address, not ${this.url.host}`
        : `signal-cli answered HTTP ${response.statusCode} for its event stream`);
    }
    let quiet: NodeJS.Timeout | undefined;
    const watch = () => {
      clearTimeout(quiet);
      quiet = setTimeout(() => response.destroy(new Error(`signal-cli's event stream was quiet for ${Math.round(quietMs / 1000)} s (it sends a keep-alive every 15 s)`)), quietMs);
      quiet.unref();
    };
    watch();
    response.setEncoding('utf8');
    let pending = '';
    let event = '';
    let data: string[] = [];
    let size = 0;
    let oversized = false;
    try {
      for await (const chunk of response as AsyncIterable<string>) {
        watch();
        pending += chunk;
        let end: number;
        while ((end = pending.indexOf('\n')) >= 0) {
          const line = pending.slice(0, end).replace(/\r$/, '');
          pending = pending.slice(end + 1);
          if (line === '') {
            if (data.length > 0 && !oversized) yield { event: event || 'message', data: data.join('\n') };
            event = '';
            data = [];
            size = 0;
            oversized = false;
            continue;
          }
          if (line.startsWith(':')) continue;
          const colon = line.indexOf(':');
          const field = colon < 0 ? line : line.slice(0, colon);
          const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
          if (field === 'event') event = value.slice(0, 64);
          else if (field === 'data') {
            size += value.length;
            if (size > MAX_EVENT_BYTES) oversized = true;
            else data.push(value);
          }
        }
        if (pending.length > MAX_EVENT_BYTES) {
          // A line that never ends: what it holds is dropped, and the event it belongs to with it.
          pending = '';
          oversized = true;
        }
      }
    } finally {
      clearTimeout(quiet);
      response.destroy();
    }
  }
}
