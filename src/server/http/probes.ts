/**
 * The probes, as routes answered before the application loads: they take the
 * pipeline every route takes (pipeline.ts). Liveness says nothing an open port
 * does not already say, so it needs no credential on any bind. Readiness
 * declares its rule as its verifier: a credential is needed from remote
 * callers when the bind reaches beyond loopback, and its detail is given only
 * to authenticated callers. Loopback callers are never rate limited. Monitors
 * hit them hard: their answers are made once, and sent with one writeHead.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isLoopbackAddress } from '../../shared/config/exposure.ts';
import { DomainError } from '../kernel/errors.ts';
import type { FastRoute, Principal } from '../kernel/registration.ts';

export type Readiness = 'starting' | 'ready' | 'stopping';

export interface ProbeOptions {
  readiness: () => Readiness;
  /** Readiness checks that fail, by name: the daemon listens but cannot serve. */
  problems: () => Record<string, string>;
  /** Whether the request presents a credential (a bearer, or a trusted proxy's user header). */
  presentsCredential: (req: IncomingMessage) => boolean;
  /** Whether the bind reaches beyond loopback, where readiness needs a credential from remote callers. */
  exposed: boolean;
  /** Authenticates a caller that presents a credential (throws a DomainError when it is refused). */
  authenticate: (req: IncomingMessage) => Promise<Principal>;
  /** Readiness detail for authenticated callers. */
  detail: () => Record<string, unknown>;
}

export const PROBE_PATHS = ['/healthz', '/health', '/readyz', '/ready'] as const;
const PROBE_METHODS = ['GET', 'HEAD'] as const;

/** A probe's answer: its body and its headers made once, the request id's value filled in as each is sent. */
interface Answer {
  status: number;
  payload: Buffer;
  headers: string[];
}
const answerOf = (status: number, value: unknown): Answer => {
  const payload = Buffer.from(JSON.stringify(value));
  return { status, payload, headers: ['content-type', 'application/json; charset=utf-8', 'content-length', String(payload.length), 'cache-control', 'no-store', 'x-request-id', ''] };
};
const LIVE = answerOf(200, { ok: true, status: 'live' });
const PLAIN: Record<Readiness | 'unavailable', Answer> = {
  ready: answerOf(200, { ok: true, status: 'ready' }),
  starting: answerOf(503, { ok: false, status: 'starting' }),
  stopping: answerOf(503, { ok: false, status: 'stopping' }),
  unavailable: answerOf(503, { ok: false, status: 'unavailable' }),
};

/** Sends an answer with one writeHead, the cheapest way Node sends a response; the headers are read before it returns, so they are shared. */
function send(res: ServerResponse, answer: Answer, requestId: string, head: boolean): void {
  answer.headers[7] = requestId;
  res.writeHead(answer.status, answer.headers);
  res.end(head ? undefined : answer.payload);
}

const fromLoopback = (req: IncomingMessage): boolean => isLoopbackAddress(req.socket.remoteAddress ?? '');

/** The probes' routes, in PROBE_PATHS' order. */
export function probeRoutes(options: ProbeOptions): FastRoute[] {
  const liveness: Omit<FastRoute, 'path'> = {
    methods: PROBE_METHODS, auth: 'public', unmetered: fromLoopback,
    handler: ({ req, res, requestId }) => send(res, LIVE, requestId, req.method === 'HEAD'),
  };
  const readiness: Omit<FastRoute, 'path'> = {
    methods: PROBE_METHODS, unmetered: fromLoopback,
    auth: {
      verify: {
        // The caller who presents a credential is authenticated (and gets the detail); one who presents none is answered plainly where that is allowed.
        headers: (req) => {
          if (options.presentsCredential(req)) return options.authenticate(req);
          if (options.exposed && !fromLoopback(req)) {
            throw new DomainError('unauthorized', 'Readiness needs a credential beyond loopback: "Authorization: Bearer <credential>".', { headers: { 'www-authenticate': 'Bearer' } });
          }
          return undefined;
        },
      },
    },
    handler: ({ req, res, requestId, verified }) => {
      const problems = options.problems();
      const readiness = options.readiness();
      // A daemon that listens but cannot serve (its store unreachable, its disk full) is not ready.
      const state = readiness === 'ready' && Object.keys(problems).length > 0 ? 'unavailable' : readiness;
      const head = req.method === 'HEAD';
      if (verified === undefined) return send(res, PLAIN[state], requestId, head);
      const detailed = answerOf(state === 'ready' ? 200 : 503, { ok: state === 'ready', status: state, ...options.detail(), ...(Object.keys(problems).length ? { problems } : {}) });
      return send(res, detailed, requestId, head);
    },
  };
  return [
    { path: '/healthz', ...liveness }, { path: '/health', ...liveness },
    { path: '/readyz', ...readiness }, { path: '/ready', ...readiness },
  ];
}
