import { expect } from 'chai';
import { freePort, Home, sleep, waitFor } from '../support/cli.ts';
import { TestHost } from '../support/netns.ts';
import { dashedDevice, newDevice, RawSocket } from '../support/ws-client.ts';

describe('device pairing (e2e)', function () {
  let home: Home;
  let port: number;
  let token: string;
  const sockets: RawSocket[] = [];
  const open = async (headers: Record<string, string> = {}) => {
    const socket = new RawSocket(`ws://127.0.0.1:${port}/`, headers);
    sockets.push(socket);
    await socket.opened();
    return socket;
  };

  beforeEach(async () => {
    port = await freePort();
    home = new Home({ GATEWAY_PORT: String(port) });
    // Not announced on this machine's own network.
    await home.run(['config', 'set', 'gateway.discovery.mdns.enabled', 'false']);
    const started = await home.run(['start', '--bind', 'lan']);
    expect(started.code, started.stderr).to.equal(0);
    token = home.token();
  });
  afterEach(() => {
    sockets.splice(0).forEach((socket) => socket.close());
    home.cleanup();
  });

  describe('from a second host (network namespace)', function () {
    const host = TestHost.perTest();
    let remote: TestHost;
    let client: Home;
    beforeEach(() => {
      remote = host();
      client = new Home();
    });
    afterEach(() => client.cleanup());

    it('goes pending -> approved -> token reused -> revoked -> refused', async () => {
      const url = `ws://${remote.hostAddress}:${port}`;
      const first = await remote.run(['devices', 'list', '--url', url, '--json'], { ...client.env, GATEWAY_TOKEN: token });
      expect(first.code, first.stderr).to.equal(1);
      expect(first.json.error.code).to.equal('PAIRING_REQUIRED');
      expect(first.json.error.hints.join(' ')).to.match(/gateway devices approve [A-Z0-9]{8}/);

      const pending = await home.run(['devices', 'list', '--pending', '--json']);
      expect(pending.json.pending).to.have.length(1);
      const request = pending.json.pending[0];
      expect(request).to.include({ address: remote.address, viaProxy: false, role: 'operator' });
      expect((await home.run(['devices', 'approve'])).code).to.equal(2);
      const approved = await home.run(['devices', 'approve', '--latest', '--json']);
      expect(approved.code, approved.stderr).to.equal(0);
      expect(approved.json.device.id).to.equal(request.deviceId);
      expect((await home.run(['devices', 'approve', '--latest'])).code).to.equal(5);

      // GATEWAY_URL stands for --url.
      const second = await remote.run(['devices', 'list', '--json'], { ...client.env, GATEWAY_TOKEN: token, GATEWAY_URL: url });
      expect(second.code, second.stderr).to.equal(0);
      expect(second.json.paired.map((d: { id: string }) => d.id)).to.include(request.deviceId);

      // The device token it received now suffices on its own.
      const reuse = await remote.run(['status', '--url', url, '--json'], client.env);
      expect(reuse.code, reuse.stderr).to.equal(0);
      expect(reuse.json).to.include({ state: 'running', port });
      expect(reuse.json.rpc.ok).to.equal(true);

      const revoked = await home.run(['devices', 'revoke', request.deviceId, '--json']);
      expect(revoked.code).to.equal(0);
      const refused = await remote.run(['devices', 'list', '--url', url, '--json'], client.env);
      expect(refused.code).to.equal(1);
      expect(refused.json.error.code).to.equal('UNAUTHORIZED');

      const audit = await home.run(['audit', '--since', '1h', '--json']);
      const kinds = audit.json.events.map((event: { kind: string }) => event.kind);
      expect(kinds).to.include.members(['device.pair.requested', 'device.pair.approved', 'device.revoked']);
      expect((await home.run(['audit', '--since', new Date(Date.now() + 60_000).toISOString(), '--json'])).json.events).to.deep.equal([]);
      expect((await home.run(['audit', '--since', 'yesterday-ish'])).code).to.equal(2);
    });

    it('joins with a one-time invite code, which works once', async () => {
      const url = `ws://${remote.hostAddress}:${port}`;
      const invite = await home.run(['devices', 'invite', '--scopes', 'operator.read,operator.write', '--ttl', '10m', '--json']);
      expect(invite.json.code).to.match(/^[A-Z2-9]{4}-[A-Z2-9]{4}-[A-Z2-9]{4}$/);
      expect(Date.parse(invite.json.expiresAt)).to.be.closeTo(Date.now() + 600_000, 60_000);
      const joined = await remote.run(['devices', 'join', invite.json.code, '--url', url, '--json'], client.env);
      expect(joined.code, joined.stderr).to.equal(0);
      expect(joined.json.scopes).to.deep.equal(['operator.read', 'operator.write']);
      const status = await remote.run(['status', '--url', url, '--json'], client.env);
      expect(status.json.rpc.ok).to.equal(true);
      const again = await remote.run(['devices', 'join', invite.json.code, '--url', url, '--json'], new Home().env);
      expect(again.code).to.equal(1);
      expect(again.json.error.code).to.equal('UNAUTHORIZED');
      // Read and write, not pairing: it cannot approve devices.
      const denied = await remote.run(['devices', 'list', '--url', url, '--json'], client.env);
      expect(denied.json.error.code).to.equal('FORBIDDEN');
      expect(denied.json.error.message).to.include('operator.pairing');
    });
  });

  it('never approves a connection that came through a proxy, even from loopback', async () => {
    const socket = await open({ 'x-forwarded-for': '203.0.113.9' });
    const refused = await socket.connect({ token });
    expect(refused.error.code).to.equal('PAIRING_REQUIRED');
    expect(refused.error.details.requestId).to.match(/^[A-Z0-9]{8}$/);
    expect(refused.error.details.hint).to.equal(`gateway devices approve ${refused.error.details.requestId}`);
    await socket.closed;
    expect(socket.closeCode).to.equal(1008);
    const list = await home.run(['devices', 'list', '--pending', '--json']);
    expect(list.json.pending[0]).to.include({ viaProxy: true, requestId: refused.error.details.requestId });
  });

  it('pushes device.pair.requested and device.pair.resolved to operators', async () => {
    const operator = await open();
    expect((await operator.connect({ token })).ok).to.equal(true);
    const device = newDevice();
    const stranger = await open({ forwarded: 'for=198.51.100.4' });
    const refused = await stranger.connect({ token }, [], { device });
    const requested = await operator.next((frame) => frame.event === 'device.pair.requested');
    expect(requested.payload).to.include({ requestId: refused.error.details.requestId, deviceId: device.id });
    await home.run(['devices', 'reject', refused.error.details.requestId]);
    const resolved = await operator.next((frame) => frame.event === 'device.pair.resolved');
    expect(resolved.payload).to.include({ decision: 'rejected', deviceId: device.id });
    const late = await home.run(['devices', 'approve', refused.error.details.requestId, '--json']);
    expect(late.code).to.equal(5);
  });

  it('refuses a forged signature, a reused or foreign nonce, an old signature and a mismatched id', async () => {
    const cases: [string, (params: any) => void][] = [
      ['forged', (params) => { params.device.signature = Buffer.alloc(64, 1).toString('base64url'); }],
      ['scopes changed after signing', (params) => { params.scopes = ['operator.admin']; }],
      ['foreign nonce', (params) => { params.device.nonce = 'x'.repeat(32); }],
      ['old', (params) => { params.device.signedAt -= 10 * 60_000; }],
      ['id', (params) => { params.device.id = newDevice().id; }],
    ];
    for (const [name, tamper] of cases) {
      const socket = await open();
      const refused = await socket.connect({ token }, [], { tamper });
      expect(refused.ok, name).to.equal(false);
      expect(refused.error.code, name).to.equal('UNAUTHORIZED');
      await socket.closed;
      expect(socket.closeCode, name).to.equal(1008);
    }
    // A connect captured on one connection does not work on another: its nonce is foreign there.
    const first = await open();
    const device = newDevice();
    let captured: any;
    await first.connect({ token }, [], { device, tamper: (params) => { captured = structuredClone(params); } });
    const replay = await open();
    await replay.next((frame) => frame.event === 'connect.challenge');
    replay.send({ type: 'req', id: 'r', method: 'connect', params: captured });
    expect((await replay.next((frame) => frame.id === 'r')).error.code).to.equal('UNAUTHORIZED');
    const missing = await open();
    const noDevice = await missing.connect({ token }, [], { tamper: (params) => { delete params.device; } });
    expect(noDevice.error.code).to.equal('INVALID_REQUEST');
  });

  it('refuses scope escalation by a paired device and closes a revoked device\'s connections', async () => {
    const invite = await home.run(['devices', 'invite', '--scopes', 'operator.read', '--json']);
    // '-p' is how the profile flag may start, with its value glued on.
    const device = dashedDevice('p');
    const joined = await open();
    const hello = await joined.connect({ inviteCode: invite.json.code }, [], { device });
    expect(hello.ok).to.equal(true);
    expect(hello.payload.scopes).to.deep.equal(['operator.read']);
    const deviceToken = hello.payload.deviceToken;
    expect(Buffer.from(deviceToken, 'base64url').length).to.be.at.least(32);

    const denied = await joined.call('config.set', { key: 'log.level', value: 'debug' });
    expect(denied.error).to.deep.include({ code: 'FORBIDDEN', details: { missingScope: 'operator.admin' } });

    const escalate = await open({ 'x-real-ip': '192.0.2.1' });
    const refused = await escalate.connect({ deviceToken }, ['operator.read', 'operator.admin'], { device });
    expect(refused.error.code).to.equal('PAIRING_REQUIRED');

    const reused = await open();
    expect((await reused.connect({ deviceToken }, [], { device })).payload.scopes).to.deep.equal(['operator.read']);
    // Its id starts with '-', and still reads as an id, before or after the flags; a mistyped flag stays a usage error.
    const unknown = await home.run(['devices', 'revoke', '--json', '-Qx3kP9mZt2LwV8rYb1N']);
    expect(unknown.code, unknown.stderr).to.equal(5);
    expect(unknown.json.error.message).to.include('-Qx3kP9mZt2LwV8rYb1N');
    expect((await home.run(['devices', 'revoke', '--devic-id', device.id])).code).to.equal(2);
    const extra = await home.run(['devices', 'revoke', device.id, '-Qx3kP9mZt2LwV8rYb1N', '--json']);
    expect(extra.code).to.equal(2);
    expect(extra.json.error.message).to.equal('Unexpected argument: -Qx3kP9mZt2LwV8rYb1N');
    const revoked = await home.run(['devices', 'revoke', device.id, '--json']);
    expect(revoked.code, revoked.stderr).to.equal(0);
    expect(revoked.json.deviceId).to.equal(device.id);
    await waitFor(() => joined.closeCode, 5000, 'the revoked device\'s first connection to close');
    expect(joined.closeCode).to.equal(1008);
    await waitFor(() => reused.closeCode, 5000, 'the revoked device\'s second connection to close');
    const after = await open();
    expect((await after.connect({ deviceToken }, [], { device })).error.code).to.equal('UNAUTHORIZED');
  });

  it('expires invites, and rotation replaces a device token at once', async () => {
    const invite = await home.run(['devices', 'invite', '--ttl', '1s', '--json']);
    await sleep(1200);
    const late = await open();
    expect((await late.connect({ inviteCode: invite.json.code })).error.code).to.equal('UNAUTHORIZED');
    expect((await home.run(['devices', 'invite', '--ttl', 'soon'])).code).to.equal(2);

    const fresh = await home.run(['devices', 'invite', '--json']);
    const device = newDevice();
    const socket = await open();
    const { payload } = await socket.connect({ inviteCode: fresh.json.code }, [], { device });
    const rotated = await home.run(['devices', 'rotate', '--json', '--', device.id]);
    expect(rotated.json.deviceToken).to.be.a('string').and.not.equal(payload.deviceToken);
    await socket.closed;
    const old = await open();
    expect((await old.connect({ deviceToken: payload.deviceToken }, [], { device })).error.code).to.equal('UNAUTHORIZED');
    const renewed = await open();
    expect((await renewed.connect({ deviceToken: rotated.json.deviceToken }, [], { device })).ok).to.equal(true);
    expect((await home.run(['devices', 'revoke', 'no-such-device'])).code).to.equal(5);
  });

  it('never uses credentials stored for another gateway with --url', async () => {
    const other = await freePort();
    const second = new Home({ GATEWAY_PORT: String(other) });
    try {
      await second.run(['start']);
      // This home's own gateway token and device token belong to its own daemon, not to the other one.
      const result = await home.run(['devices', 'list', '--url', `ws://127.0.0.1:${other}`, '--json']);
      expect(result.code).to.equal(1);
      expect(result.json.error.code).to.equal('UNAUTHORIZED');
    } finally {
      second.cleanup();
    }
  });
});
