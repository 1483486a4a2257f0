import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { sign } from '@octokit/webhooks-methods';
import { freePort, Home, waitFor } from '../support/cli.ts';
import { deliver, pushPayload, TEST_WEBHOOK_SECRET } from '../support/webhooks.ts';

const SECRET = TEST_WEBHOOK_SECRET;

describe('webhook ingestion and jobs (e2e)', function () {
  let home: Home;
  let base: string;
  let token: string;
  const api = async (path: string) => {
    const response = await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${token}` } });
    return { status: response.status, body: await response.json() as any };
  };
  const job = (id: string) => waitFor(async () => {
    const found = await api(`/jobs/${id}`);
    return found.body.status === 'succeeded' || found.body.status === 'failed' ? found.body : undefined;
  }, 10_000, `job ${id}`);

  before(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    home = new Home({ GATEWAY_PORT: String(port) });
    expect((await home.run(['start'])).code).to.equal(0);
    token = home.token();
  });
  after(() => home.cleanup());

  it('answers 503 until a secret is configured', async () => {
    const response = await deliver(base, 'ping', '{}');
    expect(response.status).to.equal(503);
    expect(response.body).to.include({ error: 'unavailable', statusCode: 503 });
    const set = await home.run(['webhooks', 'secret', 'set', '--json'], { input: `${SECRET}\n` });
    expect(set.json).to.include({ name: 'webhooks.github.secret', daemonNotified: true });
  });

  it('checks the published signature test vector over the raw bytes', async () => {
    await home.run(['secrets', 'set', 'webhooks.github.secret'], { input: "It's a Secret to Everybody" });
    const vector = 'sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17';
    const good = await deliver(base, 'ping', 'Hello, World!', { signature: vector });
    // The signature is right, so the body is looked at: it is not JSON.
    expect(good.status).to.equal(400);
    expect(good.body.message).to.equal('The payload is not valid JSON.');
    const bad = await deliver(base, 'ping', 'Hello, World!', { signature: vector.replace('757', '758') });
    expect(bad.body.message).to.include('signature does not match');
    await home.run(['secrets', 'set', 'webhooks.github.secret'], { input: SECRET });
  });

  it('accepts a signed push, and its job, run in the delivery\'s own commit while none waits, records it', async () => {
    const body = JSON.stringify(pushPayload(4096));
    const deliveryId = randomUUID();
    const accepted = await deliver(base, 'push', body, { deliveryId, hookId: '123' });
    expect(accepted.status).to.equal(200);
    expect(accepted.body).to.include({ ok: true, deliveryId, duplicate: false });
    expect(accepted.body.jobId).to.match(/^job_/);
    // No job waited before it: it finished in the commit the answer waited for.
    expect((await api(`/jobs/${accepted.body.jobId}`)).body).to.include({ status: 'succeeded', attempts: 1 });
    const done = await job(accepted.body.jobId);
    expect(done).to.include({ kind: 'github.push', status: 'succeeded', attempts: 1, source: deliveryId });
    expect(done.result).to.include({ repository: 'acme/widgets', ref: 'refs/heads/main', headCommit: 'a'.repeat(40) });
    expect(done.result.commits).to.be.greaterThan(5);
  });

  it('is idempotent per hook and delivery id, also without a hook id and under concurrency', async () => {
    const body = JSON.stringify(pushPayload());
    const deliveryId = randomUUID();
    const first = await deliver(base, 'push', body, { deliveryId, hookId: '9' });
    const again = await deliver(base, 'push', body, { deliveryId, hookId: '9' });
    expect(again.body).to.deep.equal({ ok: true, deliveryId, jobId: first.body.jobId, duplicate: true });
    const otherHook = await deliver(base, 'push', body, { deliveryId, hookId: '10' });
    expect(otherHook.body.duplicate).to.equal(false);

    const noHook = randomUUID();
    const a = await deliver(base, 'push', body, { deliveryId: noHook });
    const b = await deliver(base, 'push', body, { deliveryId: noHook });
    expect(a.body.duplicate).to.equal(false);
    expect(b.body).to.include({ duplicate: true, jobId: a.body.jobId });

    const racing = randomUUID();
    const results = await Promise.all(Array.from({ length: 20 }, () => deliver(base, 'push', body, { deliveryId: racing, hookId: '7' })));
    expect(results.every((result) => result.status === 200)).to.equal(true);
    expect(results.filter((result) => !result.body.duplicate)).to.have.length(1);
    expect(new Set(results.map((result) => result.body.jobId)).size).to.equal(1);
    const jobs = await api(`/jobs?kind=github.push&limit=200`);
    expect(jobs.body.jobs.filter((j: { source: string }) => j.source === racing)).to.have.length(1);
  });

  it('never reserves a delivery id for an invalid signature', async () => {
    const body = JSON.stringify(pushPayload());
    const deliveryId = randomUUID();
    expect((await deliver(base, 'push', body, { deliveryId, secret: 'wrong' })).status).to.equal(400);
    expect((await deliver(base, 'push', body, { deliveryId })).body.duplicate).to.equal(false);
  });

  it('refuses bad deliveries with the right status and error body', async () => {
    const push = JSON.stringify(pushPayload());
    const noEvent = await fetch(`${base}/webhooks`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-github-delivery': 'd', 'x-hub-signature-256': await sign(SECRET, push) }, body: push });
    expect(noEvent.status).to.equal(400);
    expect(await noEvent.json()).to.deep.include({ error: 'bad_request', statusCode: 400 });
    const cases: [string, string, number, string][] = [
      ['push', '{"ref":"refs/heads/main","after":"abc"}', 400, 'repository.full_name'],
      ['push', '{"after":"abc","repository":{"full_name":"a/b"}}', 400, 'ref'],
      ['installation', '{"action":"created","installation":{}}', 400, 'installation.id'],
      ['installation_repositories', '{"installation":{"id":1}}', 400, 'action'],
      ['issues', '[1,2,3]', 400, 'JSON object'],
      ['push', 'not json', 400, 'not valid JSON'],
    ];
    for (const [event, body, status, fragment] of cases) {
      const response = await deliver(base, event, body);
      expect(response.status, body).to.equal(status);
      expect(response.body.message, body).to.include(fragment);
    }
    const get = await fetch(`${base}/webhooks`);
    expect(get.status).to.equal(405);
    expect(get.headers.get('allow')).to.equal('POST');
    expect(await get.json()).to.include({ error: 'bad_request', statusCode: 405 });
    const query = await deliver(base, 'push', push, { signature: 'sha256=00' }).then(() => fetch(`${base}/webhooks?token=abc`, { method: 'POST' }));
    expect(query.status).to.equal(400);
    const xml = await deliver(base, 'push', push, { contentType: 'application/xml' });
    expect(xml.status).to.equal(415);
    expect(xml.body.error).to.equal('unsupported_media_type');
    const huge = 'x'.repeat(25 * 1024 * 1024 + 1);
    const tooBig = await fetch(`${base}/webhooks`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-github-event': 'push', 'x-github-delivery': 'big', 'x-hub-signature-256': 'sha256=00' }, body: huge });
    expect(tooBig.status).to.equal(413);
    expect(await tooBig.json()).to.include({ error: 'payload_too_large' });
  });

  it('accepts form-encoded deliveries, signed over the raw form body', async () => {
    const payload = JSON.stringify({ zen: 'Keep it logically awesome.', hook_id: 1 });
    const body = `payload=${encodeURIComponent(payload)}`;
    const response = await deliver(base, 'ping', body, { contentType: 'application/x-www-form-urlencoded' });
    expect(response.status).to.equal(200);
    const done = await job(response.body.jobId);
    expect(done).to.include({ kind: 'github.ping', status: 'succeeded' });
    const missing = await deliver(base, 'ping', 'other=1', { contentType: 'application/x-www-form-urlencoded' });
    expect(missing.status).to.equal(400);
    expect(missing.body.message).to.include('payload=');
  });

  it('keeps installations and their repositories current', async () => {
    const installation = { id: 4242, account: { login: 'acme' }, target_type: 'Organization' };
    const created = await deliver(base, 'installation', JSON.stringify({ action: 'created', installation, repositories: [{ full_name: 'acme/a' }, { full_name: 'acme/b' }] }));
    expect((await job(created.body.jobId)).result).to.deep.equal({ installation: 4242, action: 'created' });
    const changed = await deliver(base, 'installation_repositories', JSON.stringify({ action: 'added', installation, repositories_added: [{ full_name: 'acme/c' }], repositories_removed: [{ full_name: 'acme/a' }] }));
    expect((await job(changed.body.jobId)).result).to.deep.equal({ installation: 4242, added: ['acme/c'], removed: ['acme/a'] });
    const other = await deliver(base, 'star', JSON.stringify({ action: 'created', repository: { full_name: 'acme/b' } }));
    expect((await job(other.body.jobId)).result).to.deep.equal({ event: 'star', action: 'created', acknowledged: true });
  });

  it('accepts the previous secret during rotation, and not after', async () => {
    const body = JSON.stringify(pushPayload());
    await home.run(['secrets', 'set', 'webhooks.github.secret', '--keep-previous'], { input: 'next-secret' });
    expect((await deliver(base, 'push', body, { secret: SECRET })).status).to.equal(200);
    expect((await deliver(base, 'push', body, { secret: 'next-secret' })).status).to.equal(200);
    await home.run(['secrets', 'set', 'webhooks.github.secret'], { input: SECRET });
    expect((await deliver(base, 'push', body, { secret: 'next-secret' })).status).to.equal(400);
  });

  it('lists jobs newest first with filters and cursor pagination, and 404s what is absent', async () => {
    const page1 = await api('/jobs?kind=github.push&limit=2');
    expect(page1.status).to.equal(200);
    expect(page1.body.jobs).to.have.length(2);
    expect(Date.parse(page1.body.jobs[0].createdAt)).to.be.at.least(Date.parse(page1.body.jobs[1].createdAt));
    const page2 = await api(`/jobs?kind=github.push&limit=2&cursor=${page1.body.nextCursor}`);
    expect(page2.body.jobs.map((j: { id: string }) => j.id)).to.not.include.members(page1.body.jobs.map((j: { id: string }) => j.id));
    const succeeded = await api('/jobs?status=succeeded&limit=200');
    expect(succeeded.body.jobs.every((j: { status: string }) => j.status === 'succeeded')).to.equal(true);
    for (const query of ['limit=0', 'limit=201', 'limit=abc', 'status=done', 'cursor=nonsense', 'sort=asc']) {
      const response = await api(`/jobs?${query}`);
      expect(response.status, query).to.equal(400);
      expect(response.body.error).to.equal('bad_request');
    }
    for (const id of ['job_missing', '0', 'DROP TABLE jobs', '%00']) {
      const response = await api(`/jobs/${encodeURIComponent(id)}`);
      expect(response.status, id).to.equal(404);
      expect(response.body).to.deep.include({ error: 'not_found', statusCode: 404 });
    }
    expect((await fetch(`${base}/jobs`)).status).to.equal(401);
    const reader = await (await fetch(`${base}/tokens`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'r', scopes: ['tokens:read'] }) })).json() as { token: string };
    const forbidden = await fetch(`${base}/jobs`, { headers: { authorization: `Bearer ${reader.token}` } });
    expect(forbidden.status).to.equal(403);
    expect(((await forbidden.json()) as { message: string }).message).to.include('jobs:read');
  });

  it('lists, shows and retries jobs from the CLI', async () => {
    const list = await home.run(['jobs', 'list', '--kind', 'github.push', '--limit', '3', '--json']);
    expect(list.code).to.equal(0);
    expect(list.json.jobs).to.have.length(3);
    expect(list.json).to.have.property('nextCursor');
    const shown = await home.run(['jobs', 'show', list.json.jobs[0].id, '--json']);
    expect(shown.json).to.include({ id: list.json.jobs[0].id, status: 'succeeded' });
    expect((await home.run(['jobs', 'show', 'job_nope'])).code).to.equal(5);
    const retry = await home.run(['jobs', 'retry', list.json.jobs[0].id, '--json']);
    expect(retry.code).to.equal(1);
    expect(retry.json.error.message).to.include('only a failed job');
    expect((await home.run(['jobs', 'retry', 'job_nope'])).code).to.equal(5);
  });
});
