/**
 * A server for the pipeline figures (bench/pipeline.ts), in a process of its
 * own: `node bench/pipeline-server.ts <port> gateway|bare`; prints
 * "listening" once it is.
 *
 * gateway: the daemon's HTTP server (src/server/http/server.ts) with its
 * pipeline, authenticator, request budget and probes, serving a webhook route
 * answered before the application (/early/webhook) and the same route as an
 * application route (/app/webhook): its signature (X-Hub-Signature-256 over
 * the raw body) declared as its verifier, a JSON body of at most 1 MiB,
 * answered {"ok": true}.
 *
 * bare: a node:http server doing the same by hand: GET /healthz as
 * bench/support.ts's bare server answers it, and the webhook route with its
 * method, media type, size limit and signature checked and its body parsed.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { pino } from 'pino';
import { GatewayCredential } from '../src/server/auth/gateway-credential.ts';
import { HttpAuthenticator } from '../src/server/auth/http-auth.ts';
import { AuthLockout, RequestBudget } from '../src/server/auth/throttle.ts';
import { createHttpServer } from '../src/server/http/server.ts';
import { sendJson } from '../src/server/kernel/answer.ts';
import { DomainError } from '../src/server/kernel/errors.ts';
import type { RouteBody } from '../src/server/kernel/body.ts';
import type { FastRoute } from '../src/server/kernel/module.ts';
import { TableBuilder } from '../src/server/kernel/registry.ts';
import { hmacSignature } from '../src/server/kernel/verifiers.ts';
import { effectiveConfig } from '../src/shared/config/keys.ts';
import { WEBHOOK_BENCH_SECRET } from './webhooks.ts';

const LIMIT = 1024 * 1024;
const [port, kind] = [Number(process.argv[2]), process.argv[3]];

function gateway() {
  // The budget as the bench's daemons have it: high enough that no load test is answered 429.
  const config = effectiveConfig({ gateway: { rateLimit: { max: 10_000_000 } } });
  const logger = pino({ level: 'silent' });
  const authenticator = new HttpAuthenticator({
    config: () => config, credential: new GatewayCredential('token', 'bench-gateway-token', undefined),
    lockout: new AuthLockout(config.gateway.auth.rateLimit), audit: () => undefined,
  });
  const verify = hmacSignature({
    header: 'x-hub-signature-256', prefix: 'sha256=', secrets: () => [WEBHOOK_BENCH_SECRET],
    unconfigured: () => new DomainError('unavailable', 'No webhook secret is configured.'),
    refusal: () => new DomainError('invalid', 'The X-Hub-Signature-256 signature does not match the body.'),
  });
  const body: RouteBody = { types: ['application/json'], limit: LIMIT };
  const builder = new TableBuilder({ reservedPaths: () => [], compileSchema: () => undefined });
  builder.api('bench', logger, true).http.route({ method: 'POST', path: '/app/webhook', auth: { verify }, body, handler: (http) => { http.body = { ok: true }; } });
  const early: FastRoute = { path: '/early/webhook', methods: ['POST'], auth: { verify }, body, handler: ({ res }) => sendJson(res, 200, { ok: true }) };
  const budget = new RequestBudget(config.gateway.rateLimit.max, config.gateway.rateLimit.windowMs);
  return createHttpServer({
    logger, config: () => config, exposed: false, readiness: () => 'ready', problems: () => ({}), detail: () => ({}),
    fastRoute: (path) => (path === early.path ? early : undefined), budget, authenticator, table: () => builder.table,
  });
}

function bare() {
  const live = Buffer.from(JSON.stringify({ ok: true, status: 'live' }));
  const answer = (res: ServerResponse, status: number, value: unknown) => {
    const payload = Buffer.from(JSON.stringify(value));
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': payload.length, 'cache-control': 'no-store' });
    res.end(payload);
  };
  const webhook = (req: IncomingMessage, res: ServerResponse) => {
    if (req.method !== 'POST') return answer(res, 405, { error: 'method' });
    if ((req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase() !== 'application/json') return answer(res, 415, { error: 'type' });
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= LIMIT) chunks.push(chunk);
    });
    req.on('end', () => {
      if (size > LIMIT) return answer(res, 413, { error: 'size' });
      const raw = Buffer.concat(chunks, size);
      const given = /^sha256=([0-9a-f]{64})$/i.exec(String(req.headers['x-hub-signature-256'] ?? ''))?.[1];
      if (!given || !timingSafeEqual(createHmac('sha256', WEBHOOK_BENCH_SECRET).update(raw).digest(), Buffer.from(given, 'hex'))) return answer(res, 401, { error: 'signature' });
      try {
        JSON.parse(raw.toString('utf8'));
      } catch {
        return answer(res, 400, { error: 'json' });
      }
      return answer(res, 200, { ok: true });
    });
  };
  return createServer((req, res) => {
    if (req.url === '/healthz') {
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': live.length, 'cache-control': 'no-store' });
      return res.end(live);
    }
    if (req.url === '/early/webhook' || req.url === '/app/webhook') return webhook(req, res);
    return answer(res, 404, { error: 'not found' });
  });
}

const server = kind === 'bare' ? bare() : gateway();
server.listen(port, '127.0.0.1', () => process.stdout.write('listening\n'));
// An exit of its own on a signal, so that a profile taken with --cpu-prof is written.
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => process.exit(0));
