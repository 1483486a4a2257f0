import { createHmac } from 'node:crypto';
import type { IncomingMessage, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { pino } from 'pino';
import { GatewayCredential } from '../../../../src/server/auth/gateway-credential.ts';
import { HttpAuthenticator } from '../../../../src/server/auth/http-auth.ts';
import { AuthLockout, RequestBudget } from '../../../../src/server/auth/throttle.ts';
import { createHttpServer } from '../../../../src/server/http/server.ts';
import { probeRoutes } from '../../../../src/server/http/probes.ts';
import { sendEmpty, sendJson } from '../../../../src/server/kernel/answer.ts';
import { DomainError } from '../../../../src/server/kernel/errors.ts';
import type { FastRoute, HttpRoute, Principal, RouteContext } from '../../../../src/server/kernel/module.ts';
import { TableBuilder } from '../../../../src/server/kernel/registry.ts';
import { hmacSignature, sameSecret, secretHeader } from '../../../../src/server/kernel/verifiers.ts';
import { effectiveConfig } from '../../../../src/shared/config/keys.ts';

const TOKEN = 'gateway-token-for-the-pipeline-unit-test';
const HOOK_SECRET = 'the-hook-secret';
const SIGNING = ['current-signing-secret', 'previous-signing-secret'];
const json = { 'content-type': 'application/json' };
const log = pino({ level: 'silent' });
const ID = /^[0-9a-f]{8}-[0-9a-z]+$/;

const sign = (body: string, secret = SIGNING[0]!) => `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;

/** Product-token-like bearers: a reader with jobs:read, an admin. */
const bearers = (value: string): Principal | undefined => {
  if (value === 'reader-token') return { kind: 'token', subject: 'reader', scopes: new Set(['jobs:read']) };
  if (value === 'admin-token') return { kind: 'token', subject: 'admin', scopes: new Set(['admin']) };
  return undefined;
};

interface Pipeline {
  url: string;
  server: Server;
  /** Refusals told to the early routes that count theirs. */
  refused: string[];
  /** The secrets the signed routes take; empty means none is configured. */
  secrets: string[];
  on: { feature: boolean };
}

/** The daemon's HTTP server with the real pipeline, authenticator and budgets, and a table of routes of every kind. */
async function startPipeline(): Promise<Pipeline> {
  const config = effectiveConfig({ gateway: { rateLimit: { max: 1000, windowMs: 60_000 } } });
  const authenticator = new HttpAuthenticator({
    config: () => config, credential: new GatewayCredential('token', TOKEN, undefined),
    lockout: new AuthLockout(config.gateway.auth.rateLimit), audit: () => undefined,
  });
  authenticator.addVerifier(bearers);
  const state: Pick<Pipeline, 'refused' | 'secrets' | 'on'> = { refused: [], secrets: [...SIGNING], on: { feature: true } };
  const signature = () => hmacSignature({
    header: 'x-signature', prefix: 'sha256=', secrets: () => state.secrets,
    unconfigured: () => new DomainError('unavailable', 'No signing secret is configured.'),
    refusal: (presented) => new DomainError('unauthorized', presented ? 'The signature does not match the body.' : 'The request is not signed.'),
  });
  const hookToken = secretHeader({
    headers: ['authorization', 'x-hook-token'], secret: () => HOOK_SECRET,
    unconfigured: () => new DomainError('unavailable', 'No hook token.'),
    refusal: (presented) => new DomainError('unauthorized', presented ? 'The hook token is not valid.' : 'The hook token is missing.', { headers: { 'www-authenticate': 'Bearer' } }),
  });
  const builder = new TableBuilder({ reservedPaths: () => [], compileSchema: () => undefined });
  const api = builder.api('pipeline-test', log, true);
  const echo = (http: RouteContext) => {
    http.body = { principal: (http.state.principal as Principal | undefined)?.subject ?? null, received: http.received?.value ?? null, verified: http.verified ?? null };
  };
  const routes: HttpRoute[] = [
    { method: 'POST', path: '/app/items', auth: { scope: 'jobs:read' }, body: { types: ['application/json'], limit: 256 }, handler: echo },
    { method: 'GET', path: '/app/admin', auth: 'gateway', handler: echo },
    { method: 'GET', path: '/app/open', auth: { scope: 'jobs:read', open: (req) => req.headers['x-open'] === 'yes' }, handler: echo },
    { method: 'GET', path: '/app/public', auth: 'public', handler: echo },
    { method: 'GET', path: '/app/switched', auth: 'gateway', enabled: () => state.on.feature, handler: echo },
    { method: 'POST', path: '/app/envelope', auth: 'gateway', envelope: true, body: { types: ['application/json'], limit: 64 }, handler: echo },
    { method: 'GET', path: '/app/convention', auth: 'gateway', errorBody: (error) => ({ error: { message: error.message, code: error.status } }), handler: echo },
    { method: 'POST', path: '/app/signed', auth: { verify: signature() }, body: { types: ['application/json'], limit: 256, raw: true }, handler: (http) => { http.body = { signed: http.received!.raw.toString() }; } },
  ];
  for (const route of routes) api.http.route(route);
  const early: FastRoute[] = [
    {
      path: '/early/signed', methods: ['POST'], auth: { verify: signature() }, body: { types: ['application/json'], limit: 256, raw: true },
      refused: (error) => state.refused.push((error as DomainError).message),
      handler: ({ res, received }) => sendJson(res, 200, { signed: received!.raw.toString() }),
    },
    {
      path: '/early/hook', match: 'prefix', methods: ['POST'], auth: { verify: hookToken },
      body: { types: ['application/json'], limit: 64, optional: true },
      handler: ({ res, received }) => sendJson(res, 200, { received: received?.value ?? null }),
    },
    { path: '/early/limited', methods: ['GET'], auth: 'public', budget: new RequestBudget(3, 60_000), handler: ({ res }) => sendJson(res, 200, {}) },
    { path: '/early/empty', methods: ['DELETE'], auth: 'public', handler: ({ res }) => sendEmpty(res, 204) },
  ];
  const server = createHttpServer({
    logger: log, config: () => config, exposed: false, readiness: () => 'ready', problems: () => ({}), detail: () => ({ profile: 'unit' }),
    fastRoute: (path) => early.find((route) => path === route.path || (route.match === 'prefix' && path.startsWith(`${route.path}/`))),
    budget: new RequestBudget(1000, 60_000), authenticator, table: () => builder.table,
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server, ...state };
}

describe('the HTTP pipeline', function () {
  let pipeline: Pipeline;
  before(async () => {
    pipeline = await startPipeline();
  });
  after(() => new Promise<void>((resolve) => pipeline.server.close(() => resolve())));
  beforeEach(() => {
    pipeline.refused.length = 0;
    pipeline.secrets.splice(0, pipeline.secrets.length, ...SIGNING);
    pipeline.on.feature = true;
  });

  const request = async (path: string, init: RequestInit & { token?: string } = {}) => {
    const headers = new Headers(init.headers);
    if (init.token) headers.set('authorization', `Bearer ${init.token}`);
    const response = await fetch(`${pipeline.url}${path}`, { ...init, headers });
    const text = await response.text();
    let body: any = text;
    try {
      body = JSON.parse(text);
    } catch {
      // not JSON
    }
    return { status: response.status, headers: response.headers, body };
  };
  const post = (path: string, body: string, headers: Record<string, string> = json, token?: string) => request(path, { method: 'POST', body, headers, token });

  describe('body declaration', () => {
    it('answers 415 naming the types the route takes, on an application route and on an early one', async () => {
      const app = await post('/app/items', 'a=b', { 'content-type': 'application/x-www-form-urlencoded' }, TOKEN);
      expect(app.status).to.equal(415);
      expect(app.body).to.deep.equal({ error: 'unsupported_media_type', message: 'Send the body as application/json (got application/x-www-form-urlencoded).', statusCode: 415 });
      const early = await post('/early/signed', 'x', { 'content-type': 'text/plain', 'x-signature': sign('x') });
      expect(early.body).to.deep.equal({ error: 'unsupported_media_type', message: 'Send the body as application/json (got text/plain).', statusCode: 415 });
    });

    it('answers 413 past the declared limit, announced or streamed', async () => {
      const big = JSON.stringify({ text: 'x'.repeat(400) });
      const announced = await post('/app/items', big, json, TOKEN);
      expect(announced.status).to.equal(413);
      expect(announced.body).to.deep.equal({ error: 'payload_too_large', message: 'The body is larger than 256 bytes.', statusCode: 413 });
      // Streamed without a length: the limit holds all the same.
      const stream = new ReadableStream({ start(controller) { controller.enqueue(new TextEncoder().encode(big)); controller.close(); } });
      const streamed = await fetch(`${pipeline.url}/early/hook/x`, { method: 'POST', body: stream, headers: { ...json, 'x-hook-token': HOOK_SECRET }, duplex: 'half' } as RequestInit);
      expect(streamed.status).to.equal(413);
    });

    it('answers 400 for JSON that does not parse or nests too deep, and takes an empty body where the route allows one', async () => {
      expect((await post('/app/items', '{"a":', json, TOKEN)).body).to.deep.equal({ error: 'bad_request', message: 'The body is not valid JSON.', statusCode: 400 });
      const deep = await post('/app/items', `${'['.repeat(70)}${']'.repeat(70)}`, json, TOKEN);
      expect(deep.status).to.equal(400);
      expect(deep.body.message).to.match(/deep/);
      expect((await post('/app/items', '', json, TOKEN)).status, 'a body it requires').to.equal(400);
      expect((await post('/early/hook/x', '', { ...json, 'x-hook-token': HOOK_SECRET })).body, 'an optional body').to.deep.equal({ received: null });
    });

    it('reads the body only once the caller is authenticated, and hands it to the handler parsed', async () => {
      const big = JSON.stringify({ text: 'x'.repeat(400) });
      expect((await post('/app/items', big, json)).status, 'no credential: 401 before 413').to.equal(401);
      expect((await post('/app/items', big, { 'content-type': 'text/plain' }, 'reader-token')).status, 'then 415').to.equal(415);
      expect((await post('/early/hook/x', big, { 'content-type': 'text/plain', 'x-hook-token': 'wrong' })).status, 'a wrong token: 401 before 415').to.equal(401);
      expect((await post('/app/items', '{"n":1}', json, 'reader-token')).body).to.deep.equal({ principal: 'reader', received: { n: 1 }, verified: null });
    });
  });

  describe('auth declaration', () => {
    it('answers 401 with a challenge for a missing credential, and for a wrong one', async () => {
      const missing = await request('/app/admin');
      expect(missing.status).to.equal(401);
      expect(missing.headers.get('www-authenticate')).to.equal('Bearer');
      expect(missing.body).to.deep.equal({ error: 'unauthorized', message: 'This route needs a credential: "Authorization: Bearer <credential>".', statusCode: 401 });
      const wrong = await request('/app/admin', { token: 'not-the-token' });
      expect(wrong.status).to.equal(401);
      expect(wrong.headers.get('www-authenticate')).to.equal('Bearer error="invalid_token"');
      expect((await request('/app/admin', { headers: { authorization: 'Basic abc' } })).status, 'not a bearer').to.equal(401);
    });

    it('answers 403 naming the scope a credential lacks; admin and the gateway credential hold every scope', async () => {
      expect((await request('/app/admin', { token: 'reader-token' })).body).to.deep.equal({ error: 'forbidden', message: 'This route needs the gateway\'s own credential.', statusCode: 403 });
      expect((await request('/app/open', { token: 'admin-token' })).body.principal).to.equal('admin');
      expect((await request('/app/admin', { token: 'admin-token' })).status).to.equal(200);
      expect((await request('/app/admin', { token: TOKEN })).body.principal).to.equal('gateway');
      expect((await post('/app/items', '{}', json, TOKEN)).status).to.equal(200);
    });

    it('lets a scoped route be open to the callers its rule names, and only them', async () => {
      expect((await request('/app/open', { headers: { 'x-open': 'yes' } })).body).to.deep.equal({ principal: null, received: null, verified: null });
      expect((await request('/app/open')).status).to.equal(401);
      expect((await request('/app/open', { token: 'reader-token' })).body.principal).to.equal('reader');
    });

    it('checks a secret presented in a header before the body: missing, wrong, then right, as a bearer or in its own header', async () => {
      const missing = await post('/early/hook/a', '{}');
      expect(missing.body).to.deep.equal({ error: 'unauthorized', message: 'The hook token is missing.', statusCode: 401 });
      expect(missing.headers.get('www-authenticate')).to.equal('Bearer');
      expect((await post('/early/hook/a', '{}', { ...json, 'x-hook-token': `${HOOK_SECRET}x` })).body.message).to.equal('The hook token is not valid.');
      expect((await post('/early/hook/a', '{}', { ...json, 'x-hook-token': HOOK_SECRET.slice(1) })).status, 'shorter').to.equal(401);
      expect((await post('/early/hook/a', '{"k":1}', { ...json, authorization: `Bearer ${HOOK_SECRET}` })).body).to.deep.equal({ received: { k: 1 } });
    });

    it('checks a signature over the raw body once it is read: unsigned, bad, with the previous secret, on both kinds of route', async () => {
      for (const path of ['/early/signed', '/app/signed']) {
        const body = '{"event":"push"}';
        expect((await post(path, body)).body, path).to.deep.equal({ error: 'unauthorized', message: 'The request is not signed.', statusCode: 401 });
        expect((await post(path, body, { ...json, 'x-signature': sign(`${body} `) })).body.message, path).to.equal('The signature does not match the body.');
        expect((await post(path, body, { ...json, 'x-signature': 'sha256=00' })).status, `${path}: a short digest`).to.equal(401);
        expect((await post(path, body, { ...json, 'x-signature': sign(body, 'another-secret') })).status, path).to.equal(401);
        expect((await post(path, body, { ...json, 'x-signature': sign(body) })).body, path).to.deep.equal({ signed: body });
        expect((await post(path, body, { ...json, 'x-signature': sign(body, SIGNING[1]).toUpperCase().replace('SHA256=', 'sha256=') })).status, `${path}: the previous secret, in capitals`).to.equal(200);
      }
    });

    it('refuses with 503 while no secret is configured, before the body is read', async () => {
      pipeline.secrets.length = 0;
      const answer = await post('/early/signed', 'not json', { 'content-type': 'text/plain' });
      expect(answer.body).to.deep.equal({ error: 'unavailable', message: 'No signing secret is configured.', statusCode: 503 });
    });

    it('tells an early route of its own refusals (authentication, body) and not of the common ones (405, 400, 429)', async () => {
      await post('/early/signed', '{}');
      await post('/early/signed', 'x', { 'content-type': 'text/plain' });
      await request('/early/signed');
      await post('/early/signed?token=x', '{}');
      expect(pipeline.refused).to.deep.equal(['The request is not signed.', 'Send the body as application/json (got text/plain).']);
    });
  });

  describe('the common checks', () => {
    it('answers 405 with Allow for a method the route does not take: probes, early routes and application routes', async () => {
      for (const [path, method, allow] of [['/healthz', 'POST', 'GET, HEAD'], ['/early/signed', 'GET', 'POST'], ['/app/items', 'GET', 'POST'], ['/app/admin', 'DELETE', 'GET']] as const) {
        const answer = await request(path, { method });
        expect(answer.status, path).to.equal(405);
        expect(answer.headers.get('allow'), path).to.equal(allow);
        expect(answer.body, path).to.deep.equal({ error: 'bad_request', message: `${method} is not allowed here; use ${allow}.`, statusCode: 405 });
      }
    });

    it('answers 404 for a path no route claims and for a route switched off, before asking for a credential', async () => {
      expect((await request('/nowhere')).body).to.deep.equal({ error: 'not_found', message: 'No route for GET /nowhere.', statusCode: 404 });
      expect((await request('/app/switched', { token: TOKEN })).status).to.equal(200);
      pipeline.on.feature = false;
      expect((await request('/app/switched')).body).to.deep.equal({ error: 'not_found', message: 'No route for GET /app/switched.', statusCode: 404 });
    });

    it('refuses a credential in the query string on every kind of route, before anything else is asked', async () => {
      for (const path of ['/healthz?token=x', '/readyz?access_token=x', '/early/hook/a?hooks_token=x', '/app/public?%74oken=x', '/nowhere?api_key=x']) {
        const answer = await request(path, { method: path.startsWith('/early') ? 'POST' : 'GET' });
        expect(answer.status, path).to.equal(400);
        expect(answer.body.message, path).to.match(/never accepted in the query string/);
      }
    });

    it('answers 429 with Retry-After once a route\'s budget is spent, in the common body', async () => {
      const answers = [];
      for (let index = 0; index < 5; index++) answers.push(await request('/early/limited'));
      expect(answers.slice(0, 3).map((answer) => answer.status)).to.deep.equal([200, 200, 200]);
      const limited = answers.find((answer) => answer.status === 429)!;
      expect(limited, 'the route\'s own budget of 3').to.not.equal(undefined);
      expect(Number(limited.headers.get('retry-after'))).to.be.within(1, 60);
      expect(limited.body).to.include({ error: 'rate_limited', statusCode: 429 });
      expect(limited.headers.get('x-request-id')).to.match(ID);
    });
  });

  describe('request ids and the error body', () => {
    it('gives every answer an id of its own, and keeps a well-formed one the caller sends', async () => {
      const answers = await Promise.all(['/healthz', '/readyz', '/nowhere', '/app/public', '/app/admin'].map((path) => request(path)));
      answers.push(await post('/early/signed', '{}'), await post('/early/hook/x', '{}', { ...json, 'x-hook-token': HOOK_SECRET }), await request('/early/empty', { method: 'DELETE' }));
      expect(answers.at(-1)!.status).to.equal(204);
      const ids = answers.map((answer) => answer.headers.get('x-request-id'));
      for (const id of ids) expect(id).to.match(ID);
      expect(new Set(ids).size).to.equal(ids.length);
      for (const path of ['/healthz', '/app/public', '/app/admin', '/nowhere']) {
        expect((await request(path, { headers: { 'x-request-id': 'trace-0af7651916cd43dd' } })).headers.get('x-request-id'), path).to.equal('trace-0af7651916cd43dd');
        expect((await request(path, { headers: { 'x-request-id': 'not an id;' } })).headers.get('x-request-id'), path).to.match(ID);
      }
      expect((await post('/early/signed', '{}', { ...json, 'x-request-id': 'delivery-7' })).headers.get('x-request-id')).to.equal('delivery-7');
    });

    it('answers every refusal in one shape, whichever kind of route refuses', async () => {
      const refusals = await Promise.all([
        request('/app/admin'), request('/app/admin', { token: 'reader-token' }), request('/nowhere'), request('/healthz', { method: 'PUT' }),
        post('/app/items', JSON.stringify({ x: 'y'.repeat(400) }), json, TOKEN), post('/early/signed', 'x', { 'content-type': 'text/plain' }),
        post('/early/hook/a', '{}'), post('/app/signed', '{}'),
      ]);
      expect(refusals.map((answer) => answer.status)).to.deep.equal([401, 403, 404, 405, 413, 415, 401, 401]);
      for (const answer of refusals) {
        expect(Object.keys(answer.body).sort()).to.deep.equal(['error', 'message', 'statusCode']);
        expect(answer.body.statusCode).to.equal(answer.status);
        expect(answer.headers.get('content-type')).to.equal('application/json; charset=utf-8');
        expect(answer.headers.get('x-request-id')).to.match(ID);
      }
    });

    it('says ok: false in an envelope route\'s refusals, and keeps a route\'s own convention', async () => {
      expect((await post('/app/envelope', '{', json, TOKEN)).body).to.deep.equal({ ok: false, error: 'bad_request', message: 'The body is not valid JSON.', statusCode: 400 });
      expect((await post('/app/envelope', '{}')).body).to.include({ ok: false, error: 'unauthorized' });
      expect((await request('/app/convention')).body).to.deep.equal({ error: { message: 'This route needs a credential: "Authorization: Bearer <credential>".', code: 401 } });
      expect((await request('/app/convention', { method: 'POST' })).body.error.code, 'a method it does not take').to.equal(405);
    });
  });

  describe('probes', () => {
    it('answers liveness and readiness with precomputed bodies, HEAD without one', async () => {
      const live = await request('/healthz');
      expect(live.body).to.deep.equal({ ok: true, status: 'live' });
      expect(live.headers.get('cache-control')).to.equal('no-store');
      expect(live.headers.get('content-length')).to.equal(String(JSON.stringify(live.body).length));
      const head = await fetch(`${pipeline.url}/health`, { method: 'HEAD' });
      expect(head.status).to.equal(200);
      expect(await head.text()).to.equal('');
      expect(head.headers.get('x-request-id')).to.match(ID);
      expect((await request('/ready')).body).to.deep.equal({ ok: true, status: 'ready' });
    });

    it('gives readiness detail to an authenticated caller only, and refuses a wrong credential', async () => {
      expect((await request('/readyz', { token: TOKEN })).body).to.deep.equal({ ok: true, status: 'ready', profile: 'unit' });
      expect((await request('/readyz', { token: 'wrong' })).status).to.equal(401);
    });

    it('declares readiness\'s rule as its verifier: a credential from beyond loopback when the bind is exposed', async () => {
      const options = { readiness: () => 'ready' as const, problems: () => ({}), detail: () => ({}), authenticate: async () => ({ kind: 'gateway', subject: 'gateway', scopes: 'all' }) as Principal };
      const fake = (address: string, authorization?: string) => ({ socket: { remoteAddress: address }, headers: authorization ? { authorization } : {} }) as unknown as IncomingMessage;
      const rule = (exposed: boolean) => {
        const readiness = probeRoutes({ ...options, exposed, presentsCredential: (req) => req.headers.authorization !== undefined })[2]!;
        expect(readiness.path).to.equal('/readyz');
        return (readiness.auth as { verify: { headers: (req: IncomingMessage) => unknown } }).verify.headers;
      };
      expect(() => rule(true)(fake('192.0.2.7'))).to.throw(DomainError, /Readiness needs a credential beyond loopback/);
      expect(rule(true)(fake('127.0.0.1'))).to.equal(undefined);
      expect(rule(false)(fake('192.0.2.7'))).to.equal(undefined);
      expect(await rule(true)(fake('192.0.2.7', 'Bearer x'))).to.include({ kind: 'gateway' });
      const liveness = probeRoutes({ ...options, exposed: true, presentsCredential: () => false })[0]!;
      expect(liveness.auth).to.equal('public');
      expect(liveness.unmetered!(fake('::ffff:127.0.0.1')), 'loopback probes are never counted').to.equal(true);
      expect(liveness.unmetered!(fake('192.0.2.7'))).to.equal(false);
    });
  });
});

describe('route verifiers', () => {
  it('compares secrets in constant time whatever their lengths, never matching an empty one', () => {
    expect(sameSecret('abc', 'abc')).to.equal(true);
    expect(sameSecret('abc', 'abd')).to.equal(false);
    // timingSafeEqual throws on buffers of different lengths: both sides are hashed first, so it never sees them.
    expect(sameSecret('a', 'a much longer secret than the one given')).to.equal(false);
    expect(sameSecret(Buffer.from('abc'), 'abc')).to.equal(true);
    expect(sameSecret('', '')).to.equal(false);
    expect(sameSecret(undefined, 'abc')).to.equal(false);
  });

  it('checks a signature over a base string of the platform\'s (Slack\'s v0:<timestamp>:<body>), refusing a stale timestamp', () => {
    const secret = 'slack-signing-secret';
    const verifier = hmacSignature({
      header: 'x-slack-signature', prefix: 'v0=', secrets: () => [secret],
      signed: (req, raw) => {
        const timestamp = String(req.headers['x-slack-request-timestamp'] ?? '');
        if (!/^\d{1,12}$/.test(timestamp) || Math.abs(Date.now() / 1000 - Number(timestamp)) > 300) throw new DomainError('unauthorized', 'stale');
        return [`v0:${timestamp}:`, raw];
      },
      unconfigured: () => new DomainError('unavailable', 'none'),
      refusal: () => new DomainError('unauthorized', 'bad signature'),
    });
    const body = Buffer.from('{"type":"event_callback"}');
    const at = (timestamp: number, signature?: string) => ({ headers: { 'x-slack-request-timestamp': String(timestamp), ...(signature ? { 'x-slack-signature': signature } : {}) } }) as unknown as IncomingMessage;
    const now = Math.floor(Date.now() / 1000);
    const signature = (timestamp: number) => `v0=${createHmac('sha256', secret).update(`v0:${timestamp}:`).update(body).digest('hex')}`;
    const received = { type: 'application/json', raw: body, value: undefined };
    expect(() => verifier.body!(at(now, signature(now)), received)).to.not.throw();
    expect(() => verifier.body!(at(now - 600, signature(now - 600)), received)).to.throw(DomainError, 'stale');
    expect(() => verifier.body!(at(now, signature(now - 1)), received)).to.throw(DomainError, 'bad signature');
    expect(() => verifier.body!(at(now), received)).to.throw(DomainError, 'bad signature');
  });

  it('checks a platform\'s secret token header (Telegram\'s), and says so while the account takes none', () => {
    let secret: string | undefined;
    const verifier = secretHeader({
      headers: ['x-telegram-bot-api-secret-token'], secret: () => secret,
      unconfigured: () => new DomainError('unavailable', 'not in webhook mode'), refusal: () => new DomainError('unauthorized', 'wrong'),
    });
    const req = (token?: string) => ({ headers: token === undefined ? {} : { 'x-telegram-bot-api-secret-token': token } }) as unknown as IncomingMessage;
    expect(() => verifier.headers!(req('t'))).to.throw(DomainError, 'not in webhook mode');
    secret = 'the-secret-token';
    expect(() => verifier.headers!(req('the-secret-token'))).to.not.throw();
    expect(() => verifier.headers!(req('the-secret-toke'))).to.throw(DomainError, 'wrong');
    expect(() => verifier.headers!(req())).to.throw(DomainError, 'wrong');
  });

  it('is refused at registration when it checks the body of a route that declares none, as is an auth of no known kind', () => {
    const api = new TableBuilder({ reservedPaths: () => [], compileSchema: () => undefined }).api('x', log, true);
    const handler = () => undefined;
    expect(() => api.http.route({ method: 'POST', path: '/a', auth: { verify: { body: () => undefined } }, handler })).to.throw(DomainError, /needs the route to declare its body/);
    expect(() => api.http.route({ method: 'POST', path: '/b', auth: { verify: {} }, handler })).to.throw(DomainError, /needs headers/);
    expect(() => api.http.route({ method: 'POST', path: '/c', auth: 'anyone' as never, handler })).to.throw(DomainError, /auth must be/);
    const plugin = new TableBuilder({ reservedPaths: () => [], compileSchema: () => undefined }).api('p', log, false);
    expect(() => plugin.http.route({ method: 'GET', path: '/d', auth: { scope: 'jobs:read' }, handler })).to.throw(DomainError, /auth must be gateway or plugin or \{verify\}/);
    expect(() => plugin.http.route({ method: 'POST', path: '/e', auth: { verify: { headers: handler } }, handler })).to.not.throw();
  });
});
