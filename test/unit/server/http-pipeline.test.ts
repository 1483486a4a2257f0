import { expect } from 'chai';
import { BUILTIN_MODULES } from '../../../src/server/daemon.ts';
import greetings from '../../fixtures/modules/greetings/module.ts';
import { startGateway, type TestGateway } from '../../support/harness.ts';

const HOOKS_TOKEN = 'hooks-token-for-the-pipeline-test';
const json = { 'content-type': 'application/json' };

/** One HTTP pipeline: probes, fast routes and the application's routes answer with the same layers. */
describe('the HTTP pipeline, composed in process', function () {
  let gateway: TestGateway;
  before(async () => {
    process.env.GATEWAY_HOOKS_TOKEN = HOOKS_TOKEN;
    gateway = await startGateway({
      modules: [...BUILTIN_MODULES, greetings],
      config: { hooks: { enabled: true, maxBodyBytes: 1024 }, gateway: { http: { maxBodyBytes: 2048 } } },
    });
  });
  after(async () => {
    delete process.env.GATEWAY_HOOKS_TOKEN;
    await gateway.stop();
  });

  const hook = (body: string, headers: Record<string, string> = json, token = HOOKS_TOKEN) =>
    gateway.request('/hooks/nope', { method: 'POST', body, headers: { ...headers, authorization: `Bearer ${token}` } });

  it('gives every answer a request id: a probe, a fast route, a route of the application, an error', async () => {
    const answers = {
      probe: await gateway.request('/healthz'),
      'probe refused': await gateway.request('/readyz?token=x'),
      'fast route': await gateway.request('/webhooks', { method: 'POST', body: '{}', headers: json }),
      'hooks refused': await hook('{}', json, 'wrong'),
      route: await gateway.request('/greetings/ada', { auth: true }),
      'route refused': await gateway.request('/greetings/ada'),
      'no route': await gateway.request('/nowhere'),
    };
    const ids = Object.entries(answers).map(([what, answer]) => {
      const id = answer.headers.get('x-request-id');
      expect(id, what).to.match(/^[0-9a-f]{8}-[0-9a-z]+$/);
      return id;
    });
    expect(new Set(ids).size, 'each its own').to.equal(ids.length);
    expect(answers.probe.status).to.equal(200);
    expect(answers['fast route'].status, 'no webhook secret').to.equal(503);
    expect(answers.route.status).to.equal(200);
  });

  it('keeps a well-formed request id the caller sends, and replaces one that is not', async () => {
    for (const path of ['/healthz', '/webhooks', '/greetings/ada', '/nowhere']) {
      const kept = await gateway.request(path, { headers: { 'x-request-id': 'trace-0af7651916cd43dd' } });
      expect(kept.headers.get('x-request-id'), path).to.equal('trace-0af7651916cd43dd');
      for (const bad of ['two words', 'x'.repeat(129), 'a;b']) {
        const replaced = await gateway.request(path, { headers: { 'x-request-id': bad } });
        expect(replaced.headers.get('x-request-id'), `${path} ${bad}`).to.match(/^[0-9a-f]{8}-[0-9a-z]+$/);
      }
    }
  });

  it('answers 405 with Allow in the common error body from a probe, a fast route and a route', async () => {
    const cases: [string, string, string][] = [['/healthz', 'POST', 'GET, HEAD'], ['/webhooks', 'GET', 'POST'], ['/hooks/x', 'GET', 'POST'], ['/greetings/ada', 'POST', 'GET']];
    for (const [path, method, allow] of cases) {
      const answer = await gateway.request(path, { method, auth: true });
      expect(answer.status, path).to.equal(405);
      expect(answer.headers.get('allow'), path).to.equal(allow);
      expect(answer.body, path).to.deep.equal({ error: 'bad_request', message: `${method} is not allowed here; use ${allow}.`, statusCode: 405 });
    }
  });

  it('answers errors in the common body from a probe, a fast route and a route', async () => {
    const probe = await gateway.request('/readyz?token=x');
    expect(probe.status).to.equal(400);
    expect(probe.body).to.include({ error: 'bad_request', statusCode: 400 });
    const fast = await gateway.request('/webhooks', { method: 'POST', body: '{}', headers: json });
    expect(fast.body).to.deep.equal({ error: 'unavailable', message: 'No webhook secret is configured: gateway secrets set webhooks.github.secret', statusCode: 503 });
    const route = await gateway.request('/greetings/ada');
    expect(route.status).to.equal(401);
    expect(route.body).to.include({ error: 'unauthorized', statusCode: 401 });
    const missing = await gateway.request('/nowhere');
    expect(missing.body).to.deep.equal({ error: 'not_found', message: 'No route for GET /nowhere.', statusCode: 404 });
  });

  it('reads the body a fast route declares after its credential: 401, then 415, 413 and 400, then the route\'s own 404', async () => {
    const big = JSON.stringify({ big: 'x'.repeat(2000) });
    expect((await hook(big, json, 'wrong')).status, 'the credential before the body').to.equal(401);
    expect((await hook('a=b', { 'content-type': 'application/x-www-form-urlencoded' })).body).to.include({ error: 'unsupported_media_type', statusCode: 415 });
    expect((await hook(big)).body).to.include({ error: 'payload_too_large', statusCode: 413 });
    expect((await hook('{not json')).body).to.include({ error: 'bad_request', message: 'The body is not valid JSON.' });
    expect((await hook('[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]')).status, 'too deep').to.equal(400);
    expect((await hook('')).status, 'an empty body is the empty payload').to.equal(404);
    expect((await hook('{}')).body).to.include({ error: 'not_found', statusCode: 404 });
  });

  it('reads the body a route declares after its authentication, with its limit and types', async () => {
    const post = (path: string, body: string, headers: Record<string, string> = json, auth = true) => gateway.request(path, { method: 'POST', body, headers, auth });
    expect((await post('/tokens', 'x'.repeat(4000), json, false)).status, 'authentication before the body').to.equal(401);
    for (const path of ['/tokens', '/tools/invoke']) {
      expect((await post(path, '{}', { 'content-type': 'text/plain' })).status, path).to.equal(415);
      expect((await post(path, JSON.stringify({ x: 'x'.repeat(4000) }))).status, path).to.equal(413);
      expect((await post(path, '{')).status, path).to.equal(400);
    }
    const tool = await post('/tools/invoke', '{');
    expect(tool.body, 'in the route\'s own convention').to.include({ ok: false, error: 'bad_request', message: 'The body is not valid JSON.' });
    // Two types, each parsed as it is: the callback of an MCP login that was never started.
    const form = await post('/oauth/mcp/callback', 'state=unknown&code=c', { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' }, false);
    const asJson = await post('/oauth/mcp/callback', JSON.stringify({ state: 'unknown', code: 'c' }), json, false);
    expect(form.status).to.equal(asJson.status).and.to.be.within(400, 404);
    expect((await post('/oauth/mcp/callback', 'x', { 'content-type': 'text/plain' }, false)).status).to.equal(415);
  });
});
