import { expect } from 'chai';
import { request } from 'node:http';
import { freePort, Home } from '../support/cli.ts';
import { RawSocket } from '../support/ws-client.ts';

describe('WebSocket control plane (e2e)', function () {
  let home: Home;
  let port: number;
  let token: string;
  const sockets: RawSocket[] = [];
  const open = async () => {
    const socket = new RawSocket(`ws://127.0.0.1:${port}/`);
    sockets.push(socket);
    await socket.opened();
    return socket;
  };

  before(async () => {
    port = await freePort();
    home = new Home({ GATEWAY_PORT: String(port) });
    const started = await home.run(['start']);
    expect(started.code, started.stderr).to.equal(0);
    token = home.token();
  });
  afterEach(() => sockets.splice(0).forEach((socket) => socket.close()));
  after(() => home.cleanup());

  it('sends connect.challenge first, then answers hello-ok and RPCs', async () => {
    const socket = await open();
    const challenge = await socket.next();
    expect(challenge).to.include({ type: 'event', event: 'connect.challenge' });
    expect(challenge.payload.nonce).to.be.a('string').with.length.greaterThan(20);
    expect(challenge.payload.ts).to.be.closeTo(Date.now(), 10_000);
    socket.frames.unshift(challenge);
    const hello = await socket.connect({ token });
    expect(hello).to.include({ type: 'res', id: 'c1', ok: true });
    expect(hello.payload).to.include({ type: 'hello-ok', protocol: 1, role: 'operator' });
    expect(hello.payload.scopes).to.include('operator.admin');
    const status = await socket.call('status');
    expect(status.ok).to.equal(true);
    expect(status.payload).to.include({ profile: 'default', port, state: 'running' });
    const health = await socket.call('health');
    expect(health.payload).to.deep.equal({ ok: true, status: 'ready' });
    const unknown = await socket.call('no.such.method');
    expect(unknown.error.code).to.equal('NOT_FOUND');
    const badParams = await socket.call('config.set', { key: 42 });
    expect(badParams.error.code).to.equal('INVALID_REQUEST');
  });

  it('refuses a first frame that is not connect with INVALID_REQUEST, then closes 1008', async () => {
    const socket = await open();
    await socket.next((frame) => frame.event === 'connect.challenge');
    socket.send({ type: 'req', id: 'x1', method: 'status' });
    const refused = await socket.next((frame) => frame.id === 'x1');
    expect(refused).to.deep.include({ ok: false });
    expect(refused.error.code).to.equal('INVALID_REQUEST');
    await socket.closed;
    expect(socket.closeCode).to.equal(1008);

    const garbage = await open();
    garbage.send('this is not json');
    await garbage.closed;
    expect(garbage.closeCode).to.equal(1008);
  });

  it('refuses a wrong token with UNAUTHORIZED, echoing nothing of it', async () => {
    const socket = await open();
    const refused = await socket.connect({ token: 'wrong-secret-value-123' });
    expect(refused.ok).to.equal(false);
    expect(refused.error.code).to.equal('UNAUTHORIZED');
    expect(JSON.stringify(refused)).to.not.include('wrong-secret-value-123').and.to.not.include(token);
    await socket.closed;
    expect(socket.closeCode).to.equal(1008);
    const missing = await open();
    expect((await missing.connect({})).error.code).to.equal('UNAUTHORIZED');
    // The credential is checked first, whatever else the frame holds: no device identity does not hide a wrong token.
    const deviceless = await open();
    const refusedFirst = await deviceless.connect({ token: 'wrong-secret-value-123' }, [], { tamper: (params) => { delete params.device; } });
    expect(refusedFirst.error.code).to.equal('UNAUTHORIZED');
  });

  it('refuses an unsupported protocol range and unknown scopes', async () => {
    const socket = await open();
    await socket.next((frame) => frame.event === 'connect.challenge');
    socket.send({ type: 'req', id: 'p', method: 'connect', params: { minProtocol: 7, maxProtocol: 9, client: { id: 't', version: '0', platform: 'x', mode: 't' }, role: 'operator', scopes: [], auth: { token } } });
    const refused = await socket.next((frame) => frame.id === 'p');
    expect(refused.error.code).to.equal('INVALID_REQUEST');
    expect(refused.error.message).to.include('protocol');
    const scoped = await open();
    const bad = await scoped.connect({ token }, ['operator.everything']);
    expect(bad.error.code).to.equal('INVALID_REQUEST');
  });

  it('names the missing scope with FORBIDDEN', async () => {
    const socket = await open();
    await socket.connect({ token }, ['operator.read']);
    const denied = await socket.call('config.set', { key: 'log.level', value: 'warn' });
    expect(denied.error.code).to.equal('FORBIDDEN');
    expect(denied.error.message).to.include('operator.admin');
    expect(denied.error.details).to.deep.equal({ missingScope: 'operator.admin' });
    expect((await socket.call('status')).ok).to.equal(true);
  });

  it('closes with 1009 on an oversized frame, before and after connect', async () => {
    const early = await open();
    early.send('x'.repeat(100 * 1024));
    await early.closed;
    expect(early.closeCode).to.equal(1009);
    const late = await open();
    await late.connect({ token });
    late.send(JSON.stringify({ type: 'req', id: 'big', method: 'status', params: { pad: 'x'.repeat(2 * 1024 * 1024) } }));
    await late.closed;
    expect(late.closeCode).to.equal(1009);
  });

  it('answers requests pipelined right behind connect, in order', async () => {
    const socket = await open();
    await socket.connect({ token }, [], { tamper: (params) => {
      // Sent in the same tick as connect, before the gateway has decided it.
      setImmediate(() => { socket.send({ type: 'req', id: 'p1', method: 'health' }); socket.send({ type: 'req', id: 'p2', method: 'status' }); });
      void params;
    } });
    expect((await socket.next((frame) => frame.id === 'p1')).ok).to.equal(true);
    expect((await socket.next((frame) => frame.id === 'p2')).payload.profile).to.equal('default');
  });

  it('refuses upgrades on other paths', async () => {
    const socket = new RawSocket(`ws://127.0.0.1:${port}/elsewhere`);
    await socket.opened().then(() => expect.fail('upgraded'), () => undefined);
  });

  it('answers a refused upgrade as any HTTP refusal: its status, a request id and the one error body', async () => {
    /** An upgrade request's answer, read as HTTP. */
    const refusal = (path: string, headers: Record<string, string> = {}) => new Promise<{ status: number; headers: Record<string, unknown>; body: any }>((resolve, reject) => {
      const req = request({
        host: '127.0.0.1', port, path,
        headers: { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==', ...headers },
      });
      req.once('upgrade', () => reject(new Error('upgraded')));
      req.once('response', (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (chunk) => (text += chunk)).once('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: JSON.parse(text) }));
      });
      req.once('error', reject);
      req.end();
    });
    const elsewhere = await refusal('/elsewhere');
    expect(elsewhere.status).to.equal(404);
    expect(elsewhere.body).to.deep.include({ error: 'not_found', statusCode: 404 });
    expect(elsewhere.body.message).to.match(/No WebSocket endpoint at \/elsewhere/);
    expect(elsewhere.headers['x-request-id']).to.match(/^[0-9a-f]{8}-/);
    const traced = await refusal('/?token=secret-value', { 'x-request-id': 'trace-42' });
    expect(traced.status).to.equal(400);
    expect(traced.headers['x-request-id']).to.equal('trace-42');
    expect(traced.body.message).to.match(/query string/).and.not.include('secret-value');
    const hostile = await refusal('/elsewhere', { 'x-request-id': 'a b' });
    expect(hostile.headers['x-request-id'], 'a malformed id is replaced, not echoed').to.not.equal('a b');
  });
});
