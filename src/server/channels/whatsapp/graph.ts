/**
 * Meta's Graph API as the WhatsApp Cloud API serves it: a phone number's
 * profile, the messages endpoint, and a media object's address and bytes.
 * Requests go over node:http and node:https on the kept-alive agents the
 * upstreams share (Node's fetch loads undici, about 17 MB of an idle
 * daemon). The access token travels in a header to the API's host and to
 * Meta's media hosts only, never in an address, and no error repeats it.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { isLoopbackAddress } from '../../../shared/config/exposure.ts';
import { agentFor } from '../../kernel/upstream-fetch.ts';
import { readIncoming } from '../attachments.ts';

/** Meta's Graph API. */
export const GRAPH_ROOT = 'https://graph.facebook.com';
/** The Graph API version asked for when none is configured. */
export const GRAPH_VERSION = 'v24.0';
/** Longest a call may take before it counts as failed. */
const CALL_TIMEOUT_MS = 30_000;
/** The most of a JSON answer read. */
const MAX_ANSWER_BYTES = 1024 * 1024;
/** Hosts Meta serves media from (lookaside.fbsbx.com), besides the API's own. */
const MEDIA_DOMAINS = ['fbsbx.com', 'facebook.com', 'whatsapp.net'];

/** What the Graph API answered with an error: its HTTP status, Meta's code (and subcode), and its words. */
export class GraphError extends Error {
  readonly status: number;
  readonly code?: number;
  readonly subcode?: number;
  /** What Meta adds (error_data.details), which often says what to change. */
  readonly details?: string;
  /** The Retry-After Meta gave, when it gave one. */
  readonly retryAfterMs?: number;

  constructor(status: number, fields: { code?: number; subcode?: number; message: string; details?: string; retryAfterMs?: number }) {
    super(fields.message);
    this.name = 'GraphError';
    this.status = status;
    this.code = fields.code;
    this.subcode = fields.subcode;
    this.details = fields.details;
    this.retryAfterMs = fields.retryAfterMs;
  }

  /** "(#131047) Re-engagement message: ..." as Meta words it, with its details. */
  get described(): string {
    const details = this.details && !this.message.includes(this.details) ? ` (${this.details})` : '';
    return `${this.code !== undefined ? `error ${this.code}: ` : `HTTP ${this.status}: `}${this.message}${details}`;
  }
}

/** Where the Graph API is; the access token goes over plain http only to one on this host (a stand-in). */
export function graphRootOf(address: string | undefined): URL {
  const url = new URL(address ?? GRAPH_ROOT);
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new Error(`the Graph API must be an https:// address (got ${url.protocol})`);
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (url.protocol === 'http:' && !(isLoopbackAddress(host) || host === 'localhost')) {
    throw new Error('the Graph API must be an https:// address: over http the access token would cross the network in the clear (http is taken only for a server on this host)');
  }
  return url;
}

interface Answer { status: number; headers: IncomingHttpHeaders; body: Buffer }

/** A request's body: JSON text, or bytes with their content type (a form uploading a file). */
type Body = string | { bytes: Buffer; type: string };

function call(method: string, url: URL, token: string, body: Body | undefined, maxBytes: number, signal?: AbortSignal): Promise<Answer> {
  const http = process.getBuiltinModule(url.protocol === 'https:' ? 'node:https' : 'node:http') as typeof import('node:http');
  const timeout = AbortSignal.timeout(CALL_TIMEOUT_MS);
  return new Promise((resolve, reject) => {
    const sent = http.request(url, {
      method, agent: agentFor(url.protocol), signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
      headers: {
        authorization: `Bearer ${token}`, accept: 'application/json',
        ...(body === undefined ? {} : typeof body === 'string'
          ? { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) }
          : { 'content-type': body.type, 'content-length': String(body.bytes.length) }),
      },
    }, (response) => {
      readIncoming(response, maxBytes).then((body) => resolve({ status: response.statusCode ?? 0, headers: response.headers, body }), reject);
    });
    // What failed underneath (ECONNREFUSED, a timeout), never the address.
    sent.on('error', (error: NodeJS.ErrnoException) => reject(new Error(error.name === 'AbortError' || error.name === 'TimeoutError' ? 'no answer in time' : error.code ?? error.message)));
    sent.end(typeof body === 'string' || body === undefined ? body : body.bytes);
  });
}

/** A form as the bytes and content type a multipart request carries. */
async function formBytes(form: FormData): Promise<{ bytes: Buffer; type: string }> {
  const request = new Request('http://form.invalid/', { method: 'POST', body: form });
  return { bytes: Buffer.from(await request.arrayBuffer()), type: request.headers.get('content-type')! };
}

/** Meta's error body ({error: {message, code, error_subcode, error_data}}) as a GraphError. */
function errorOf(answer: Answer): GraphError {
  let parsed: { error?: { message?: unknown; code?: unknown; error_subcode?: unknown; error_data?: { details?: unknown } } } | undefined;
  try {
    parsed = JSON.parse(answer.body.toString('utf8'));
  } catch {
    parsed = undefined;
  }
  const error = parsed?.error;
  const retryAfter = Number(answer.headers['retry-after']);
  return new GraphError(answer.status, {
    message: typeof error?.message === 'string' ? error.message.slice(0, 500) : `the Graph API answered ${answer.status}`,
    ...(typeof error?.code === 'number' ? { code: error.code } : {}),
    ...(typeof error?.error_subcode === 'number' ? { subcode: error.error_subcode } : {}),
    ...(typeof error?.error_data?.details === 'string' ? { details: error.error_data.details.slice(0, 500) } : {}),
    ...(Number.isFinite(retryAfter) && retryAfter >= 0 ? { retryAfterMs: retryAfter * 1000 } : {}),
  });
}

/** A media object as Meta describes it: a short-lived address to fetch it from, with the same token. */
export interface MediaInfo { url: string; mime_type?: string; file_size?: number }

/** One account's client: its API root, version and access token. */
export class GraphApi {
  private readonly root: URL;
  private readonly version: string;
  private readonly token: string;

  constructor(root: URL, version: string, token: string) {
    this.root = root;
    this.version = version;
    this.token = token;
  }

  private async json<T>(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
    const url = new URL(`${this.root.pathname.replace(/\/+$/, '')}/${this.version}/${path}`, this.root);
    const sent = body === undefined ? undefined : body instanceof FormData ? await formBytes(body) : JSON.stringify(body);
    const answer = await call(method, url, this.token, sent, MAX_ANSWER_BYTES, signal);
    if (answer.status < 200 || answer.status >= 300) throw errorOf(answer);
    try {
      return JSON.parse(answer.body.toString('utf8')) as T;
    } catch {
      throw new GraphError(answer.status, { message: 'the Graph API answered with something that is not JSON' });
    }
  }

  /** The phone number's profile: the number as people see it and the business's verified name. */
  phoneNumber(id: string, signal?: AbortSignal): Promise<{ id?: string; display_phone_number?: string; verified_name?: string }> {
    return this.json('GET', `${encodeURIComponent(id)}?fields=display_phone_number,verified_name`, undefined, signal);
  }

  /** POST /<phone number id>/messages: a message, a reaction, or a read receipt; Meta's message ids. */
  async messages(phoneNumberId: string, body: Record<string, unknown>): Promise<string[]> {
    const answer = await this.json<{ messages?: { id?: unknown }[]; success?: boolean }>('POST', `${encodeURIComponent(phoneNumberId)}/messages`, { messaging_product: 'whatsapp', ...body });
    return (answer.messages ?? []).map((message) => message?.id).filter((id): id is string => typeof id === 'string');
  }

  /** POST /<phone number id>/media: a file uploaded (a voice note to send), its media id. */
  async uploadMedia(phoneNumberId: string, file: { data: Uint8Array; mimeType: string; name: string }): Promise<string> {
    const form = new FormData();
    form.set('messaging_product', 'whatsapp');
    form.set('type', file.mimeType);
    form.set('file', new Blob([new Uint8Array(file.data)], { type: file.mimeType }), file.name);
    const answer = await this.json<{ id?: unknown }>('POST', `${encodeURIComponent(phoneNumberId)}/media`, form);
    if (typeof answer.id !== 'string') throw new GraphError(200, { message: 'the Graph API gave no media id for the upload' });
    return answer.id;
  }

  mediaInfo(mediaId: string, signal?: AbortSignal): Promise<MediaInfo> {
    return this.json('GET', encodeURIComponent(mediaId), undefined, signal);
  }

  /** A media object's bytes from the address mediaInfo gave, up to maxBytes; only from Meta's hosts (or the configured API's). */
  async download(address: string, maxBytes: number, signal?: AbortSignal): Promise<Uint8Array> {
    const url = new URL(address);
    if (!this.mediaHost(url)) throw new Error(`media is fetched only from Meta's hosts, not ${url.host}`);
    const answer = await call('GET', url, this.token, undefined, maxBytes, signal);
    if (answer.status < 200 || answer.status >= 300) throw new Error(`Meta's media host answered ${answer.status}`);
    return new Uint8Array(answer.body.buffer, answer.body.byteOffset, answer.body.length);
  }

  private mediaHost(url: URL): boolean {
    if (url.origin === this.root.origin) return true;
    const host = url.hostname.toLowerCase();
    return url.protocol === 'https:' && MEDIA_DOMAINS.some((domain) => host === domain || host.endsWith(`.${domain}`));
  }
}
