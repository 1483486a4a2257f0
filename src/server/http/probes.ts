import type { IncomingMessage, ServerResponse } from 'node:http';
import { isLoopbackAddress } from '../../shared/config/exposure.ts';
import { queryCarriesCredential, queryCredentialRefused } from '../auth/http-auth.ts';
import { sendError } from '../kernel/answer.ts';
import { DomainError, methodNotAllowed, rateLimited } from '../kernel/errors.ts';

const LIVENESS = new Set(['/healthz', '/health']);
const READINESS = new Set(['/readyz', '/ready']);

const body = (value: unknown): Buffer => Buffer.from(JSON.stringify(value));
const LIVE = body({ ok: true, status: 'live' });
const READY = body({ ok: true, status: 'ready' });
const STARTING = body({ ok: false, status: 'starting' });
const STOPPING = body({ ok: false, status: 'stopping' });
const UNAVAILABLE = body({ ok: false, status: 'unavailable' });

export type Readiness = 'starting' | 'ready' | 'stopping';

export interface ProbeOptions {
  readiness: () => Readiness;
  /** Readiness checks that fail, by name: the daemon listens but cannot serve. */
  problems: () => Record<string, string>;
  /** Whether the request presents a credential (a bearer, or a trusted proxy's user header). */
  presentsCredential: (req: IncomingMessage) => boolean;
  /** Whether the bind reaches beyond loopback, where readiness needs a credential from remote callers. */
  exposed: boolean;
  /** Readiness detail for authenticated callers; throws a DomainError when the credential is refused. */
  detail: (req: IncomingMessage) => Promise<Record<string, unknown>>;
  /** Spends one request of a non-loopback caller's budget; ms to wait, or 0. */
  budget: (address: string) => number;
  /** Told of a failure no caller should see the inside of, to log. */
  onUnexpected: (error: unknown) => void;
}

const PROBE_METHODS = ['GET', 'HEAD'];

/** A probe's answer, its request id among its headers: one writeHead, the cheapest way Node sends a response. */
function send(res: ServerResponse, status: number, payload: Buffer, head: boolean, requestId: string): void {
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': payload.length, 'cache-control': 'no-store', 'x-request-id': requestId });
  res.end(head ? undefined : payload);
}

/** A refusal: the common error body, as every route answers it. */
function refuse(res: ServerResponse, error: unknown, requestId: string, options: ProbeOptions): void {
  res.setHeader('x-request-id', requestId);
  sendError(res, error, options.onUnexpected);
}

/**
 * Probes are answered ahead of the middleware stack: monitors hit them hard and
 * they must stay cheap. Liveness says nothing an open port does not already
 * say, so it needs no credential on any bind. Readiness needs one from remote
 * callers when the bind reaches beyond loopback, and its detail is given only
 * to authenticated callers. Loopback callers are never rate limited. Returns
 * whether the request was a probe.
 */
export function answerProbe(req: IncomingMessage, res: ServerResponse, options: ProbeOptions, requestId: string): boolean {
  const url = req.url ?? '/';
  const query = url.indexOf('?');
  const path = query === -1 ? url : url.slice(0, query);
  const live = LIVENESS.has(path);
  if (!live && !READINESS.has(path)) return false;
  const head = req.method === 'HEAD';
  if (req.method !== 'GET' && !head) {
    refuse(res, methodNotAllowed(req.method, PROBE_METHODS), requestId, options);
    return true;
  }
  const answer = () => {
    if (live) return send(res, 200, LIVE, head, requestId);
    const problems = options.problems();
    const readiness = options.readiness();
    // A daemon that listens but cannot serve (its store unreachable, its disk full) is not ready.
    const state = readiness === 'ready' && Object.keys(problems).length > 0 ? 'unavailable' : readiness;
    if (!options.presentsCredential(req)) {
      if (options.exposed && !isLoopbackAddress(req.socket.remoteAddress ?? '')) {
        return refuse(res, new DomainError('unauthorized', 'Readiness needs a credential beyond loopback: "Authorization: Bearer <credential>".', { headers: { 'www-authenticate': 'Bearer' } }), requestId, options);
      }
      const plain = state === 'ready' ? READY : state === 'starting' ? STARTING : state === 'stopping' ? STOPPING : UNAVAILABLE;
      return send(res, state === 'ready' ? 200 : 503, plain, head, requestId);
    }
    options.detail(req).then(
      (detail) => send(res, state === 'ready' ? 200 : 503, body({ ok: state === 'ready', status: state, ...detail, ...(Object.keys(problems).length ? { problems } : {}) }), head, requestId),
      (error: unknown) => refuse(res, error, requestId, options),
    );
  };
  if (queryCarriesCredential(url)) {
    refuse(res, queryCredentialRefused(), requestId, options);
    return true;
  }
  const address = req.socket.remoteAddress ?? '';
  if (isLoopbackAddress(address)) {
    answer();
    return true;
  }
  const wait = options.budget(address);
  if (wait > 0) refuse(res, rateLimited(wait), requestId, options);
  else answer();
  return true;
}
