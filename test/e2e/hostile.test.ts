import { expect } from 'chai';
import { createHmac, randomUUID } from 'node:crypto';
import { connect as netConnect } from 'node:net';
import { DatabaseSync } from 'node:sqlite';
import { freePort, Home } from '../support/cli.ts';
import { RawSocket } from '../support/ws-client.ts';

const SECRET = 'hostile-test-secret';

describe('hostile input and telling the truth (e2e)', function () {
  let home: Home;
  let port: number;
  let base: string;
  let token: string;
  const auth = (value = token) => ({ authorization: `Bearer ${value}` });
  const post = (path: string, body: string, headers: Record<string, string> = {}) =>
    fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...auth(), ...headers }, body });
  const deliver = (body: unknown, hookId = '1', deliveryId: string = randomUUID()) => {
    const text = JSON.stringify(body);
    return fetch(`${base}/webhooks`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json', 'x-github-event': body && typeof body === 'object' && 'installation' in body ? 'installation' : 'push',
        'x-github-delivery': deliveryId, 'x-github-hook-id': hookId, 'x-hub-signature-256': `sha256=${createHmac('sha256', SECRET).update(text).digest('hex')}`,
      },
      body: text,
    });
  };

  before(async () => {
    port = await freePort();
    base = `http://127.0.0.1:${port}`;
    home = new Home({ GATEWAY_PORT: String(port) });
    await home.run(['profiles', 'create', 'default', '--secrets', 'file']);
    await home.run(['secrets', 'set', 'webhooks.github.secret'], { input: SECRET });
    await home.run(['config', 'set', 'hooks.enabled', 'true']);
    await home.run(['config', 'set', 'hooks.mappings', JSON.stringify([{ name: 'x', action: 'wake', sessionKey: 'irc:default:dm:nobody' }])]);
    await home.run(['hooks', 'token', 'set'], { input: 'hooks-token-for-hostile-tests' });
    expect((await home.run(['start'])).code).to.equal(0);
    token = home.token();
  });
  after(() => home.cleanup());

  it('refuses dates the schema allows but the gateway cannot read, with 400 naming the field', async () => {
    for (const expiresAt of ['2026-12-31T23:59:60Z', '2027-01-01T00:00:00+00']) {
      const created = await post('/tokens', JSON.stringify({ name: 'x', scopes: ['jobs:read'], expiresAt }));
      expect(created.status, expiresAt).to.equal(400);
      expect(((await created.json()) as { message: string }).message).to.include('expiresAt');
    }
    const enqueue = await post('/tools/invoke', JSON.stringify({ tool: 'jobs.enqueue', args: { kind: 'store.prune', runAt: '2026-12-31T23:59:60Z' } }));
    expect(enqueue.status).to.equal(400);
    expect(await enqueue.json()).to.include({ ok: false });
  });

  it('refuses JSON nested deeper than 64 levels on every surface, and stays up', async () => {
    const deep = `${'['.repeat(50_000)}${']'.repeat(50_000)}`;
    const object = `{"tool":"hello","args":${'{"a":'.repeat(10_000)}1${'}'.repeat(10_000)}}`;
    for (const [path, body, headers] of [
      ['/tools/invoke', object, {}], ['/tokens', deep, {}], ['/hooks/x', deep, { authorization: 'Bearer hooks-token-for-hostile-tests' }],
    ] as [string, string, Record<string, string>][]) {
      const answer = await post(path, body, headers);
      expect(answer.status, path).to.equal(400);
      expect(JSON.stringify(await answer.json()), path).to.include('deeper than 64');
    }
    const pushDeep = await deliver({ ref: 'r', after: 'a', repository: { full_name: 'a/b' }, extra: JSON.parse(`${'['.repeat(100)}${']'.repeat(100)}`) });
    expect(pushDeep.status).to.equal(400);
    const socket = new RawSocket(`ws://127.0.0.1:${port}/`);
    expect((await socket.connect({ token })).ok).to.equal(true);
    socket.send(`{"type":"req","id":"d1","method":"tools.invoke","params":${'{"a":'.repeat(5000)}1${'}'.repeat(5000)}}`);
    const refused = await socket.next((frame) => frame.type === 'res' && frame.ok === false);
    expect(refused.error.code).to.equal('INVALID_REQUEST');
    expect(refused.error.message, 'the answer has no id, so the message says why').to.include('nests deeper than 64');
    expect((await socket.call('health')).payload.ok, 'the connection goes on').to.equal(true);
    socket.close();
    expect((await fetch(`${base}/healthz`)).status).to.equal(200);
  });

  it('validates the whole connect frame: wrong types and oversized fields are INVALID_REQUEST, never INTERNAL, and nothing is stored', async () => {
    const tampered: [string, (params: any) => void][] = [
      ['no platform', (params) => { delete params.client.platform; }],
      ['numeric platform', (params) => { params.client.platform = 7; }],
      ['numeric invite code', (params) => { params.auth.inviteCode = 123456; }],
      ['huge client id', (params) => { params.client.id = 'x'.repeat(50 * 1024); }],
    ];
    for (const [what, tamper] of tampered) {
      const socket = new RawSocket(`ws://127.0.0.1:${port}/`);
      const answer = await socket.connect({ token }, [], { tamper });
      expect(answer.ok, what).to.equal(false);
      expect(answer.error.code, what).to.equal('INVALID_REQUEST');
      socket.close();
    }
    const devices = await home.run(['devices', 'list', '--json']);
    expect(JSON.stringify(devices.json)).to.not.include('x'.repeat(200));
  });

  it('limits junk credentials by address: a new bearer on every request buys nothing, and hooks have a budget too', async () => {
    await home.run(['config', 'set', 'gateway.rateLimit.max', '30']);
    await home.run(['restart']);
    const statuses: number[] = [];
    for (let i = 0; i < 60; i++) statuses.push((await fetch(`${base}/jobs`, { headers: auth(`junk-${randomUUID()}`) })).status);
    expect(statuses.filter((status) => status === 429).length, JSON.stringify(statuses)).to.be.greaterThan(20);
    const hooks: number[] = [];
    for (let i = 0; i < 40; i++) hooks.push((await post('/hooks/x', '{}', { authorization: `Bearer junk-${i}` })).status);
    expect(hooks).to.include(429);
    // A valid credential keeps a budget of its own once it has been seen.
    await new Promise((resolve) => setTimeout(resolve, 1100));
    await home.run(['config', 'set', 'gateway.rateLimit.max', '1200']);
    await home.run(['restart']);
    token = home.token();
  });

  it('answers what is not HTTP, and headers past 16 KiB, in the common error body, then closes', async () => {
    const raw = (text: string) => new Promise<string>((resolve) => {
      const socket = netConnect(port, '127.0.0.1');
      let received = '';
      socket.on('data', (chunk) => { received += chunk.toString(); });
      socket.on('error', () => undefined);
      socket.on('close', () => resolve(received));
      socket.end(text);
    });
    const garbled = await raw('G\x00T / HTTP/1.1\r\nHost: x\r\n\r\n');
    expect(garbled).to.match(/^HTTP\/1\.1 400 Bad Request\r\n/);
    expect(garbled).to.include('connection: close');
    expect(JSON.parse(garbled.split('\r\n\r\n')[1]!)).to.deep.equal({ error: 'bad_request', message: 'The request is not well-formed HTTP/1.1.', statusCode: 400 });
    const huge = await raw(`GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
    expect(huge).to.match(/^HTTP\/1\.1 431 /);
    expect(JSON.parse(huge.split('\r\n\r\n')[1]!)).to.include({ statusCode: 431 });
    expect((await fetch(`${base}/healthz`)).status).to.equal(200);
  });

  it('refuses a time no Date can hold with INVALID_REQUEST, never INTERNAL', async () => {
    const socket = new RawSocket(`ws://127.0.0.1:${port}/`);
    expect((await socket.connect({ token }, ['operator.admin'])).ok).to.equal(true);
    for (const method of ['usage.summary', 'audit.list']) {
      const answer = await socket.call(method, { since: 1.8e19 });
      expect(answer.error?.code, method).to.equal('INVALID_REQUEST');
      expect(answer.error.message, method).to.include('since');
    }
    socket.close();
  });

  it('refuses credentials in the query however the name is spelled', async () => {
    for (const query of ['%74oken=abc', 'token[]=abc', 'TOKEN=abc', 'access_token[x]=abc']) {
      const answer = await fetch(`${base}/jobs?${query}`, { headers: auth() });
      expect(answer.status, query).to.equal(400);
    }
    expect((await fetch(`${base}/openapi.json?tokens=1&a=token`)).status, 'names that are not credentials pass').to.equal(200);
  });

  it('refuses deliveries whose jobs could never succeed, and keeps one push per hook and delivery', async () => {
    const push = (extra: Record<string, unknown>) => ({ ref: 'refs/heads/main', after: 'a'.repeat(40), repository: { full_name: 'acme/w' }, ...extra });
    expect((await deliver(push({ head_commit: { id: { nested: true } } }))).status).to.equal(400);
    const installation = (inst: Record<string, unknown>) => ({ action: 'created', installation: inst });
    expect((await deliver(installation({ id: 1, account: { login: { x: 1 } } }))).status).to.equal(400);
    expect((await deliver(installation({ id: 1.8e19 }))).status).to.equal(400);
    expect((await deliver(installation({ id: 0.5 }))).status).to.equal(400);
    expect((await deliver(installation({ id: 42, account: { login: 'acme' } }))).status).to.equal(200);

    const shared = randomUUID();
    expect((await deliver(push({}), '101', shared)).status).to.equal(200);
    expect((await deliver(push({}), '202', shared)).status).to.equal(200);
    const db = new DatabaseSync(home.file('state.db'), { readOnly: true });
    try {
      let rows: unknown[] = [];
      for (let i = 0; i < 50 && rows.length < 2; i++) {
        rows = db.prepare('SELECT hook_id FROM pushes WHERE delivery_id = ? ORDER BY hook_id').all(shared);
        if (rows.length < 2) await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(rows).to.deep.equal([{ hook_id: '101' }, { hook_id: '202' }]);
    } finally {
      db.close();
    }
  });

  it('tells the truth about tokens and retention jobs', async () => {
    const created = await home.run(['tokens', 'create', '--name', 'kept', '--scope', 'jobs:read', '--save', '--json']);
    expect(created.code, created.stderr).to.equal(0);
    const id = created.json.id as string;
    expect((await home.run(['secrets', 'list', '--json'])).stdout).to.not.include(`tokens.saved.${id}`);
    expect(Object.keys(home.secrets())).to.include(`tokens.saved.${id}`);
    const first = await home.run(['tokens', 'revoke', id, '--json']);
    expect(first.json).to.include({ id, alreadyRevoked: false });
    expect(Object.keys(home.secrets()), 'the saved copy goes with the token').to.not.include(`tokens.saved.${id}`);
    const second = await home.run(['tokens', 'revoke', id]);
    expect(second.code).to.equal(0);
    expect(second.stdout).to.include('was already revoked');

    for (let i = 0; i < 3; i++) await home.run(['restart']);
    token = home.token();
    const prunes = JSON.parse((await home.run(['jobs', 'list', '--kind', 'store.prune', '--json'])).stdout).jobs;
    expect(prunes, 'retention is queued by its interval, not at every start').to.have.length(1);
  });
});
