import { expect } from 'chai';
import { freePort, Home } from '../support/cli.ts';
import { newDevice, RawSocket } from '../support/ws-client.ts';
import { loadDeviceKey } from '../../src/shared/protocol/device-auth.ts';
import { TestHost } from '../support/netns.ts';

describe('HTTP auth, lockouts and rate limits (e2e)', function () {
  let home: Home;
  let port: number;
  let base: string;
  const token = () => home.token();
  const start = async (settings: [string, string][] = [], args: string[] = []) => {
    for (const [key, value] of settings) expect((await home.run(['config', 'set', key, value])).code, key).to.equal(0);
    const started = await home.run(['start', ...args]);
    expect(started.code, started.stderr).to.equal(0);
  };

  beforeEach(async () => {
    port = await freePort();
    base = `http://127.0.0.1:${port}`;
    home = new Home({ GATEWAY_PORT: String(port) });
  });
  afterEach(() => home.cleanup());

  it('gives readiness detail only to authenticated callers', async () => {
    await start();
    expect(await (await fetch(`${base}/readyz`)).json()).to.deep.equal({ ok: true, status: 'ready' });
    const detail = await fetch(`${base}/readyz`, { headers: { authorization: `Bearer ${token()}` } });
    expect(detail.status).to.equal(200);
    expect(await detail.json()).to.include({ ok: true, status: 'ready', profile: 'default' });
    const wrong = await fetch(`${base}/readyz`, { headers: { authorization: 'Bearer nope' } });
    expect(wrong.status).to.equal(401);
    expect(await wrong.json()).to.deep.equal({ error: 'unauthorized', message: 'The credential is not valid.', statusCode: 401 });
    const scheme = await fetch(`${base}/readyz`, { headers: { authorization: `Basic ${token()}` } });
    expect(scheme.status).to.equal(401);
  });

  it('refuses a credential in the query string, on HTTP and on the WebSocket', async () => {
    await start();
    for (const path of [`/readyz?token=${token()}`, '/anything?access_token=abc', '/healthz?password=x']) {
      const response = await fetch(`${base}${path}`);
      expect(response.status, path).to.equal(400);
      const body: any = await response.json();
      expect(body.error).to.equal('bad_request');
      expect(body.message).to.include('Authorization: Bearer').and.not.include(token());
    }
    const socket = new RawSocket(`ws://127.0.0.1:${port}/?token=${token()}`);
    await socket.opened().then(() => expect.fail('upgraded'), (error: Error) => expect(error.message).to.include('400'));
  });

  it('locks out a client after 10 failures (429 with Retry-After), whatever it sends next', async () => {
    await start([['gateway.auth.rateLimit.exemptLoopback', 'false']]);
    const statuses: number[] = [];
    for (let attempt = 0; attempt < 11; attempt++) {
      statuses.push((await fetch(`${base}/readyz`, { headers: { authorization: `Bearer wrong-${attempt}` } })).status);
    }
    expect(statuses.slice(0, 10)).to.deep.equal(Array(10).fill(401));
    expect(statuses[10]).to.equal(429);
    const right = await fetch(`${base}/readyz`, { headers: { authorization: `Bearer ${token()}` } });
    expect(right.status).to.equal(429);
    expect(Number(right.headers.get('retry-after'))).to.be.within(250, 300);
    expect(await right.json()).to.include({ error: 'rate_limited', statusCode: 429 });
    const httpAudit = await home.run(['audit', '--json']);
    expect(httpAudit.code, httpAudit.stderr).to.equal(0);
    expect(httpAudit.json.events.filter((e: { kind: string }) => e.kind === 'auth.lockout')).to.have.length(1);
    expect(httpAudit.json.events.filter((e: { kind: string }) => e.kind === 'auth.failure')).to.have.length(9);

    // The WebSocket counts its own failures per credential kind, with the same rule.
    for (let attempt = 0; attempt < 10; attempt++) {
      const socket = new RawSocket(`ws://127.0.0.1:${port}/`);
      expect((await socket.connect({ token: 'wrong' })).error.code).to.equal('UNAUTHORIZED');
      socket.close();
    }
    const locked = new RawSocket(`ws://127.0.0.1:${port}/`);
    const refused = await locked.connect({ token: token() });
    expect(refused.error.code).to.equal('RATE_LIMITED');
    expect(refused.error.details.retryAfterMs).to.be.within(250_000, 300_000);
    locked.close();
    // Device tokens are counted apart: the CLI's own device still gets in, and sees both lockouts.
    const secrets = home.secrets();
    const viaDevice = new RawSocket(`ws://127.0.0.1:${port}/`);
    expect((await viaDevice.connect({ deviceToken: secrets['device.token'] }, [], { device: loadDeviceKey(secrets['device.key']) })).ok).to.equal(true);
    const audit = await viaDevice.call('audit.list');
    viaDevice.close();
    expect(audit.payload.events.filter((e: { kind: string }) => e.kind === 'auth.lockout')).to.have.length(2);
    expect(JSON.stringify(audit.payload)).to.not.include('wrong-').and.not.include(token());
  });

  it('never locks out loopback clients by default', async () => {
    await start();
    for (let attempt = 0; attempt < 12; attempt++) await fetch(`${base}/readyz`, { headers: { authorization: 'Bearer wrong' } });
    expect((await fetch(`${base}/readyz`, { headers: { authorization: `Bearer ${token()}` } })).status).to.equal(200);
  });

  it('limits the request rate on every surface, but never loopback probes', async () => {
    await start([['gateway.rateLimit.max', '5']]);
    const statuses: number[] = [];
    for (let attempt = 0; attempt < 6; attempt++) statuses.push((await fetch(`${base}/nothing-here`)).status);
    expect(statuses).to.deep.equal([404, 404, 404, 404, 404, 429]);
    const limited = await fetch(`${base}/nothing-here`);
    expect(limited.headers.get('retry-after')).to.match(/^\d+$/);
    for (let attempt = 0; attempt < 20; attempt++) expect((await fetch(`${base}/healthz`)).status).to.equal(200);
  });

  it('accepts the password in password mode, on HTTP and the WebSocket', async () => {
    expect((await home.run(['secrets', 'set', 'gateway.password'], { input: 'correct horse battery staple\n' })).code).to.equal(0);
    await start([['gateway.auth.mode', 'password']]);
    const ok = await fetch(`${base}/readyz`, { headers: { authorization: 'Bearer correct horse battery staple' } });
    expect(ok.status).to.equal(200);
    expect((await fetch(`${base}/readyz`, { headers: { authorization: 'Bearer wrong' } })).status).to.equal(401);
    const socket = new RawSocket(`ws://127.0.0.1:${port}/`);
    expect((await socket.connect({ password: 'correct horse battery staple' })).ok).to.equal(true);
    socket.close();
    const wrong = new RawSocket(`ws://127.0.0.1:${port}/`);
    expect((await wrong.connect({ password: 'Correct horse battery staple' })).error.code).to.equal('UNAUTHORIZED');
    wrong.close();
    expect((await home.run(['status', '--json'], { env: { GATEWAY_PASSWORD: 'correct horse battery staple' } })).json.rpc.ok).to.equal(true);
  });

  describe('trusted-proxy mode', () => {
    it('accepts the user header only from a trusted proxy and refuses forwarding headers from anyone else', async () => {
      await start([['gateway.auth.mode', 'trusted-proxy'], ['gateway.trustedProxies', '["10.250.0.0/16"]']]);
      const untrusted = await fetch(`${base}/readyz`, { headers: { 'x-forwarded-user': 'alice', 'x-forwarded-for': '198.51.100.7', authorization: 'Bearer x' } });
      expect(untrusted.status).to.equal(401);
      expect(((await untrusted.json()) as any).message).to.include('not in gateway.trustedProxies');
      // The host's own CLI still reaches its daemon with the gateway token.
      expect((await home.run(['status', '--json'])).json.rpc.ok).to.equal(true);
      await home.run(['stop']);

      await start([['gateway.trustedProxies', '["127.0.0.1/32"]'], ['gateway.auth.trustedProxy.allowUsers', '["alice"]'], ['gateway.auth.trustedProxy.requiredHeaders', '["x-proxy-secret-ok"]']]);
      const ok = await fetch(`${base}/readyz`, { headers: { 'x-forwarded-user': 'alice', 'x-proxy-secret-ok': '1' } });
      expect(ok.status).to.equal(200);
      expect(await ok.json()).to.include({ profile: 'default' });
      const missingHeader = await fetch(`${base}/readyz`, { headers: { 'x-forwarded-user': 'alice', authorization: 'Bearer x' } });
      expect(missingHeader.status).to.equal(401);
      const stranger = await fetch(`${base}/readyz`, { headers: { 'x-forwarded-user': 'mallory', 'x-proxy-secret-ok': '1' } });
      expect(stranger.status).to.equal(403);
    });

    it('lets a proxied user pair a device over the WebSocket, never silently', async () => {
      await start([['gateway.auth.mode', 'trusted-proxy'], ['gateway.trustedProxies', '["127.0.0.1/32"]']]);
      const device = newDevice();
      const headers = { 'x-forwarded-user': 'alice', 'x-forwarded-for': '203.0.113.5' };
      const first = new RawSocket(`ws://127.0.0.1:${port}/`, headers);
      const refused = await first.connect({}, [], { device });
      expect(refused.error.code).to.equal('PAIRING_REQUIRED');
      first.close();
      expect((await home.run(['devices', 'approve', refused.error.details.requestId])).code).to.equal(0);
      const second = new RawSocket(`ws://127.0.0.1:${port}/`, headers);
      const hello = await second.connect({}, [], { device });
      expect(hello.ok).to.equal(true);
      expect(hello.payload.deviceToken).to.be.a('string');
      second.close();
      const noUser = new RawSocket(`ws://127.0.0.1:${port}/`, { 'x-forwarded-for': '203.0.113.5' });
      expect((await noUser.connect({}, [], { device })).error.code).to.equal('UNAUTHORIZED');
      noUser.close();
    });

    it('refuses a WebSocket upgrade with forwarding headers from an untrusted address', async () => {
      await start([['gateway.auth.mode', 'trusted-proxy'], ['gateway.trustedProxies', '["10.250.0.0/16"]']]);
      const socket = new RawSocket(`ws://127.0.0.1:${port}/`, { 'x-forwarded-user': 'alice' });
      await socket.opened().then(() => expect.fail('upgraded'), (error: Error) => expect(error.message).to.include('401'));
    });

    it('refuses to start without gateway.trustedProxies (exit 78)', async () => {
      await home.run(['config', 'set', 'gateway.auth.mode', 'trusted-proxy']);
      const result = await home.run(['start', '--json']);
      expect(result.code).to.equal(78);
      expect(result.json.error.message).to.include('gateway.trustedProxies');
    });
  });

  describe('from a second host (network namespace)', () => {
    const host = TestHost.perTest();

    it('answers liveness to anyone, readiness only with a credential, and locks out a remote client after 10 bad tokens', async () => {
      const remote = host();
      // Not announced on this machine's own network.
      await start([['gateway.discovery.mdns.enabled', 'false']], ['--bind', 'lan']);
      const script = `
        const base = 'http://${remote.hostAddress}:${port}';
        const out = [];
        out.push((await fetch(base + '/healthz')).status);
        out.push((await fetch(base + '/readyz')).status);
        for (let i = 0; i < 11; i++) out.push((await fetch(base + '/readyz', { headers: { authorization: 'Bearer bad' + i } })).status);
        const locked = await fetch(base + '/readyz', { headers: { authorization: 'Bearer ${token()}' } });
        out.push(locked.status, locked.headers.get('retry-after'));
        console.log(JSON.stringify(out));`;
      const { spawnSync } = await import('node:child_process');
      const run = spawnSync('ip', ['netns', 'exec', remote.name, process.execPath, '--input-type=module', '-e', script], { encoding: 'utf8' });
      const out = JSON.parse(run.stdout);
      expect(out[0]).to.equal(200);
      expect(out[1]).to.equal(401);
      expect(out.slice(2, 12)).to.deep.equal(Array(10).fill(401));
      expect(out[12]).to.equal(429);
      expect(out[13]).to.equal(429);
      expect(Number(out[14])).to.be.greaterThan(0);
    });
  });
});
