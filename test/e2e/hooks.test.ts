import { expect } from 'chai';
import { request } from 'node:http';
import { join } from 'node:path';
import { freePort, Home, PLUGIN_FIXTURES, waitFor } from '../support/cli.ts';

interface Answer { status: number; headers: Record<string, string | string[] | undefined>; body: any }

describe('hooks ingress (e2e)', function () {
  let home: Home;
  let port: number;
  const HOOKS_TOKEN = 'hooks-token-0123456789abcdef';

  const post = (path: string, body: string | undefined, headers: Record<string, string> = {}, method = 'POST'): Promise<Answer> => new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path, headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString();
        resolve({ status: res.statusCode!, headers: res.headers, body: text ? JSON.parse(text) : undefined });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
  const bearer = { authorization: `Bearer ${HOOKS_TOKEN}` };
  const set = async (key: string, value: unknown) => {
    const result = await home.run(['config', 'set', key, JSON.stringify(value)]);
    expect(result.code, result.stderr).to.equal(0);
  };

  beforeEach(async () => {
    port = await freePort();
    home = new Home({ GATEWAY_PORT: String(port) });
    await set('hooks.mappings', [
      { name: 'deploy', action: 'job', kind: 'deploy.requested' },
      { name: 'release', match: { field: 'release.state', equals: 'published' }, action: 'job', kind: 'release.published' },
      { name: 'poke', action: 'wake', sessionKey: 'irc:default:dm:nobody' },
      { name: 'say', action: 'message', channel: 'irc', to: 'alice', text: 'Build {{build.status}}' },
    ]);
    await set('hooks.presets', ['gmail']);
    // The deploy and release jobs are run by a plugin, as they would be on a real gateway.
    await set('plugins.load', [join(PLUGIN_FIXTURES, 'deploys')]);
    const token = await home.run(['hooks', 'token', 'set'], { input: HOOKS_TOKEN });
    expect(token.code, token.stderr).to.equal(0);
    expect((await home.run(['start'])).code).to.equal(0);
  });
  afterEach(() => home.cleanup());

  it('answers 404 everywhere under the path while hooks are disabled', async () => {
    expect((await post('/hooks/deploy', '{}', bearer)).status).to.equal(404);
    await set('hooks.enabled', true);
    expect((await post('/hooks/deploy', '{}', bearer)).status, 'hooks.enabled applies without a restart').to.equal(200);
  });

  it('checks method, query token, auth, size and name in that order', async () => {
    await set('hooks.enabled', true);
    await set('hooks.maxBodyBytes', 1024);
    const get = await post('/hooks/nope?token=x', undefined, {}, 'GET');
    expect(get.status, 'method first').to.equal(405);
    expect(get.headers.allow).to.equal('POST');
    const query = await post(`/hooks/nope?token=${HOOKS_TOKEN}`, '{}');
    expect(query.status, 'a token in the query second').to.equal(400);
    expect(query.body.message).to.match(/Authorization: Bearer|x-gateway-token/);
    const big = 'x'.repeat(4096);
    expect((await post('/hooks/nope', JSON.stringify({ big }))).status, 'auth before size').to.equal(401);
    expect((await post('/hooks/nope', JSON.stringify({ big }), { authorization: 'Bearer wrong' })).status).to.equal(401);
    expect((await post('/hooks/nope', JSON.stringify({ big }), bearer)).status, 'size before name').to.equal(413);
    const unknown = await post('/hooks/nope', '{}', bearer);
    expect(unknown.status).to.equal(404);
    expect(unknown.body).to.include({ error: 'not_found', statusCode: 404 });
    expect((await post('/hooks/%ZZ', '{}', bearer)).status, 'a malformed escape names no hook').to.equal(404);
    expect((await post('/hooks/deploy', '{}', { 'x-gateway-token': HOOKS_TOKEN })).status, 'the x-gateway-token header works too').to.equal(200);
    expect((await post('/hooks/deploy', 'not json', bearer)).status).to.equal(400);
    expect((await post('/hooks/deploy', '[1,2]', bearer)).status).to.equal(400);
    expect((await post('/hooks/deploy', 'a=b', { ...bearer, 'content-type': 'application/x-www-form-urlencoded' })).status).to.equal(415);
  });

  it('locks out repeated failures with 429 and Retry-After', async () => {
    await set('hooks.enabled', true);
    await home.run(['stop']);
    await set('gateway.auth.rateLimit', { maxFailures: 3, exemptLoopback: false });
    expect((await home.run(['start'])).code).to.equal(0);
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) statuses.push((await post('/hooks/deploy', '{}', { authorization: `Bearer wrong-${i}` })).status);
    expect(statuses).to.deep.equal([401, 401, 429, 429]);
    const locked = await post('/hooks/deploy', '{}', bearer);
    expect(locked.status, 'even the right token waits out the lockout').to.equal(429);
    expect(Number(locked.headers['retry-after'])).to.be.greaterThan(0);
  });

  it('runs job mappings with matches and idempotency keys, and the mail preset', async () => {
    await set('hooks.enabled', true);
    const queued = await post('/hooks/deploy', JSON.stringify({ ref: 'main' }), bearer);
    expect(queued.status).to.equal(200);
    expect(queued.body).to.include({ ok: true, hook: 'deploy' });
    const [result] = queued.body.results;
    expect(result).to.include({ action: 'job', kind: 'deploy.requested' });
    const job = JSON.parse((await home.run(['jobs', 'show', result.jobId, '--json'])).stdout);
    expect(job).to.include({ kind: 'deploy.requested', source: 'hook:deploy' });

    expect((await post('/hooks/release', JSON.stringify({ release: { state: 'draft' } }), bearer)).status, 'no matching mapping').to.equal(204);
    expect((await post('/hooks/release', JSON.stringify({ release: { state: 'published' } }), bearer)).status).to.equal(200);

    const first = await post('/hooks/deploy', '{"n":1}', { ...bearer, 'idempotency-key': 'run-7' });
    const retry = await post('/hooks/deploy', '{"n":1}', { ...bearer, 'idempotency-key': 'run-7' });
    expect(retry.status).to.equal(200);
    expect(retry.headers['idempotent-replayed']).to.equal('true');
    expect(retry.body).to.deep.equal(first.body);
    const jobs = JSON.parse((await home.run(['jobs', 'list', '--kind', 'deploy.requested', '--json'])).stdout).jobs;
    expect(jobs, 'the retry queued nothing').to.have.length(2);

    const data = Buffer.from(JSON.stringify({ emailAddress: 'ops@example.com', historyId: 9876 })).toString('base64');
    const mail = await post('/hooks/gmail', JSON.stringify({ message: { data, messageId: 'm-1' }, subscription: 'projects/p/subscriptions/s' }), bearer);
    expect(mail.status).to.equal(200);
    const mailJob = mail.body.results[0].jobId;
    const done = await waitFor(async () => {
      const shown = JSON.parse((await home.run(['jobs', 'show', mailJob, '--json'])).stdout);
      return shown.status === 'succeeded' ? shown : undefined;
    }, 10_000, 'the mail job');
    expect(done.result.payload).to.deep.equal({ emailAddress: 'ops@example.com', historyId: '9876', messageId: 'm-1', subscription: 'projects/p/subscriptions/s' });
    expect((await post('/hooks/gmail', JSON.stringify({ message: { data: 'not base64 json' } }), bearer)).status).to.equal(400);

    expect((await post('/hooks/poke', '{}', bearer)).status, 'waking a session that does not exist').to.equal(400);
    const say = await post('/hooks/say', JSON.stringify({ build: { status: 'green' } }), bearer);
    expect(say.status, 'the channel is not running').to.equal(503);
    const chosen = await post('/hooks/poke', JSON.stringify({ sessionKey: 'irc:default:dm:mallory' }), bearer);
    expect(chosen.status).to.equal(400);
    expect(chosen.body.message).to.match(/does not let hook callers choose a session/);
  });

  it('never queues a job nothing runs: such a mapping is refused when set, and a hook left with one does nothing', async () => {
    await set('hooks.enabled', true);
    const before = await home.run(['config', 'get', 'hooks.mappings', '--json']);
    const refused = await home.run(['config', 'set', 'hooks.mappings', JSON.stringify([{ name: 'orphan', action: 'job', kind: 'nobody.runs' }])]);
    expect(refused.code).to.equal(2);
    expect(refused.stderr).to.include('no handler runs jobs of kind nobody.runs');
    expect((await home.run(['config', 'get', 'hooks.mappings', '--json'])).json).to.deep.equal(before.json);

    // Written while the daemon was stopped (no daemon to ask): the hook answers 503 and queues nothing.
    await home.run(['stop']);
    await set('hooks.mappings', [{ name: 'orphan', action: 'job', kind: 'nobody.runs' }]);
    expect((await home.run(['start'])).code).to.equal(0);
    const answer = await post('/hooks/orphan', '{}', bearer);
    expect(answer.status).to.equal(503);
    expect(answer.body.message).to.include('no handler runs');
    expect(JSON.parse((await home.run(['jobs', 'list', '--kind', 'nobody.runs', '--json'])).stdout).jobs).to.deep.equal([]);
  });

  it('warns when the hooks token equals the gateway token', async () => {
    const same = await home.run(['hooks', 'token', 'set'], { input: home.token() });
    expect(same.code).to.equal(0);
    expect(same.stderr).to.match(/hooks\.token equals the gateway token/);
    expect(same.stdout + same.stderr).to.not.contain(home.token());
  });
});
