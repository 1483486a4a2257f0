/**
 * The Matrix client-server API as the account calls it: requests over
 * node:http and node:https on the kept-alive agents upstreams share (Node's
 * fetch loads undici, about 17 MB of an idle daemon's memory), a refusal as a
 * MatrixError with the homeserver's errcode and wait, files from its media
 * store, and where a homeserver may be.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { isLoopbackAddress } from '../../../shared/config/exposure.ts';
import { agentFor } from '../../kernel/upstream-fetch.ts';
import { readIncoming } from '../attachments.ts';

export const USER_ID = /^@[^:\s]+:[^\s]+$/;
export const ROOM = /^[!#][^:\s]+:[^\s]+$/;

/** An event as /sync hands it over; nothing in it is trusted to have the shape the specification gives. */
export interface RawEvent { type?: unknown; sender?: unknown; event_id?: unknown; state_key?: unknown; origin_server_ts?: unknown; content?: unknown }
export type Content = Record<string, unknown>;

/** A setting or a token the account cannot go on with: it waits for an operator. */
export class Refused extends Error {}

export class MatrixError extends Error {
  readonly status: number;
  readonly errcode?: string;
  readonly retryAfterMs?: number;

  constructor(status: number, errcode: string | undefined, message: string, retryAfterMs?: number) {
    super(message);
    this.status = status;
    this.errcode = errcode;
    this.retryAfterMs = retryAfterMs;
  }
}

export const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);
export const events = (holder: unknown): RawEvent[] => (isObject(holder) && Array.isArray(holder.events) ? holder.events.filter(isObject) as RawEvent[] : []);
/** The most of a JSON answer read (a first sync of a large account is several megabytes). */
const MAX_ANSWER_BYTES = 64 * 1024 * 1024;

interface Answer { status: number; headers: IncomingHttpHeaders; body: Buffer }

/**
 * One HTTP request over node:http or node:https on the kept-alive agents
 * upstreams share; the answer read whole, up to `maxBytes` (TooLarge past
 * it). A connection that closes before the answer's end is an error.
 */
function request(method: string, url: URL, headers: Record<string, string>, body: string | Uint8Array | undefined, signal: AbortSignal, maxBytes: number, type = 'application/json'): Promise<Answer> {
  const http = process.getBuiltinModule(url.protocol === 'https:' ? 'node:https' : 'node:http') as typeof import('node:http');
  return new Promise((resolve, reject) => {
    const sent = http.request(url, {
      method, agent: agentFor(url.protocol), signal,
      headers: { accept: 'application/json', ...headers, ...(body === undefined ? {} : { 'content-type': type, 'content-length': String(typeof body === 'string' ? Buffer.byteLength(body) : body.length) }) },
    }, (response) => {
      readIncoming(response, maxBytes).then((body) => resolve({ status: response.statusCode ?? 0, headers: response.headers, body }), reject);
    });
    sent.on('error', reject);
    sent.end(body);
  });
}

/** Where a homeserver is; an access token goes over plain http only to one on this host. */
export function homeserverOf(address: string | undefined): URL {
  if (!address) throw new Refused('set the homeserver: gateway config set channels.matrix.homeserver https://matrix.example.org');
  const url = new URL(address);
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new Refused(`the homeserver must be an https:// address (got ${url.protocol})`);
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (url.protocol === 'http:' && !(isLoopbackAddress(host) || host === 'localhost')) {
    throw new Refused('the homeserver must be an https:// address: over http the access token would cross the network in the clear (http is taken only for a homeserver on this host)');
  }
  return url;
}

/** One account's calls to its homeserver, with its access token. */
export class MatrixApi {
  readonly homeserver: URL;
  private readonly token: string;

  constructor(homeserver: URL, token: string) {
    this.homeserver = homeserver;
    this.token = token;
  }

  /** A client-server API call; a refusal comes back as a MatrixError with the homeserver's errcode and wait. */
  async call<T>(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
    const response = await request(method, new URL(`/_matrix/client${path}`, this.homeserver), { authorization: `Bearer ${this.token}` },
      body === undefined ? undefined : JSON.stringify(body), signal ?? AbortSignal.timeout(30_000), MAX_ANSWER_BYTES);
    const ok = response.status >= 200 && response.status < 300;
    let payload: unknown;
    try {
      payload = response.body.length ? JSON.parse(response.body.toString('utf8')) : {};
    } catch {
      throw new MatrixError(response.status, undefined, `the homeserver answered ${response.status} with something that is not JSON`);
    }
    if (!ok) {
      const problem = isObject(payload) ? payload : {};
      const retry = typeof problem.retry_after_ms === 'number' ? problem.retry_after_ms : Number(response.headers['retry-after']) * 1000 || undefined;
      throw new MatrixError(response.status, typeof problem.errcode === 'string' ? problem.errcode : undefined,
        `${typeof problem.errcode === 'string' ? `${problem.errcode}: ` : ''}${typeof problem.error === 'string' ? problem.error.slice(0, 300) : `HTTP ${response.status}`}`,
        response.status === 429 ? Math.max(0, Math.min(retry ?? 5000, 3_600_000)) : undefined);
    }
    if (!isObject(payload)) throw new MatrixError(response.status, undefined, 'the homeserver answered with JSON that is not an object');
    return payload as T;
  }

  /** Puts a file in the homeserver's media store (POST /_matrix/media/v3/upload; no name: an encrypted file's); its mxc:// address. */
  async upload(name: string | undefined, type: string, data: Uint8Array): Promise<string> {
    const url = new URL(`/_matrix/media/v3/upload${name === undefined ? '' : `?filename=${encodeURIComponent(name)}`}`, this.homeserver);
    const response = await request('POST', url, { authorization: `Bearer ${this.token}` }, data, AbortSignal.timeout(120_000), MAX_ANSWER_BYTES, type);
    let payload: Record<string, unknown> = {};
    try {
      payload = JSON.parse(response.body.toString('utf8')) as Record<string, unknown>;
    } catch {
      // said below
    }
    if (response.status < 200 || response.status >= 300 || typeof payload.content_uri !== 'string') {
      const problem = `${typeof payload.errcode === 'string' ? `${payload.errcode}: ` : ''}${typeof payload.error === 'string' ? payload.error.slice(0, 300) : `HTTP ${response.status}`}`;
      throw new MatrixError(response.status, typeof payload.errcode === 'string' ? payload.errcode : undefined, problem);
    }
    return payload.content_uri;
  }

  /** A file of the homeserver's media store (mxc://<server>/<id>), with the token, up to `maxBytes`. */
  async download(server: string, mediaId: string, maxBytes: number, signal: AbortSignal): Promise<Uint8Array> {
    const path = `${encodeURIComponent(server)}/${encodeURIComponent(mediaId)}`;
    const headers = { authorization: `Bearer ${this.token}`, accept: '*/*' };
    let response = await request('GET', new URL(`/_matrix/client/v1/media/download/${path}`, this.homeserver), headers, undefined, signal, maxBytes);
    // A homeserver from before authenticated media (Matrix 1.11) serves files at the older address.
    if (response.status === 404 || response.status === 400) {
      response = await request('GET', new URL(`/_matrix/media/v3/download/${path}`, this.homeserver), headers, undefined, signal, maxBytes);
    }
    if (response.status < 200 || response.status >= 300) throw new Error(`the homeserver answered ${response.status} for the file`);
    return response.body;
  }
}
