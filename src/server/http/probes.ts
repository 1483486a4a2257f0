import type { IncomingMessage, ServerResponse } from 'node:http';

const LIVENESS = new Set(['/healthz', '/health']);
const READINESS = new Set(['/readyz', '/ready']);

const body = (value: unknown): Buffer => Buffer.from(JSON.stringify(value));
const LIVE = body({ ok: true, status: 'live' });
const READY = body({ ok: true, status: 'ready' });
const STARTING = body({ ok: false, status: 'starting' });
const STOPPING = body({ ok: false, status: 'stopping' });

export type Readiness = 'starting' | 'ready' | 'stopping';

function send(res: ServerResponse, status: number, payload: Buffer, head: boolean, extra: Record<string, string> = {}): void {
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': payload.length,
    'cache-control': 'no-store',
    ...extra,
  });
  res.end(head ? undefined : payload);
}

/**
 * Probes are answered ahead of the middleware stack: monitors hit them hard
 * and they must stay cheap. They carry no detail beyond {ok, status}, which is
 * safe to give anyone who can reach the port. Returns whether it answered.
 */
export function answerProbe(req: IncomingMessage, res: ServerResponse, readiness: () => Readiness): boolean {
  const url = req.url ?? '/';
  const query = url.indexOf('?');
  const path = query === -1 ? url : url.slice(0, query);
  const live = LIVENESS.has(path);
  if (!live && !READINESS.has(path)) return false;
  const head = req.method === 'HEAD';
  if (req.method !== 'GET' && !head) {
    send(res, 405, body({ error: 'bad_request', message: `Method ${req.method} is not allowed on ${path}; use GET or HEAD.`, statusCode: 405 }), false, { allow: 'GET, HEAD' });
    return true;
  }
  if (live) {
    send(res, 200, LIVE, head);
    return true;
  }
  const state = readiness();
  send(res, state === 'ready' ? 200 : 503, state === 'ready' ? READY : state === 'starting' ? STARTING : STOPPING, head);
  return true;
}
