import { expect } from 'chai';
import { freePort, Home } from '../support/cli.ts';
import { FakeTailscale } from '../support/fake-tailscale.ts';

describe('the private overlay through tailscale (e2e, a recording fake of the tailscale CLI)', function () {
  let home: Home;
  let tailscale: FakeTailscale;
  let port: number;

  beforeEach(async () => {
    tailscale = new FakeTailscale({ backend: 'Running', users: { '100.101.102.103': 'alice@example.com' } });
    port = await freePort();
    home = new Home({ GATEWAY_PORT: String(port), ...tailscale.env() });
    await home.run(['profiles', 'create', 'default', '--secrets', 'file']);
  });
  afterEach(() => home.cleanup());

  it('serve: publishes the port at start, shows the overlay URL in status, resets at stop', async () => {
    await home.run(['config', 'set', 'gateway.overlay.mode', 'serve']);
    const started = await home.run(['start']);
    expect(started.code, started.stderr).to.equal(0);
    expect(tailscale.calls()).to.deep.include(['serve', '--bg', '--yes', String(port)]);
    const status = await home.run(['status', '--json']);
    expect((status.json as any).overlay).to.deep.equal({ mode: 'serve', url: 'https://gw-host.tail1234.ts.net/' });
    expect((await home.run(['status'])).stdout).to.match(/Overlay:\s+https:\/\/gw-host\.tail1234\.ts\.net\/ \(tailscale serve\)/);
    expect((await home.run(['stop'])).code).to.equal(0);
    expect(tailscale.calls().at(-1)).to.deep.equal(['serve', 'reset']);
  });

  it('funnel with password auth publishes with funnel', async () => {
    await home.run(['config', 'set', 'gateway.auth.mode', 'password']);
    await home.run(['secrets', 'set', 'gateway.password'], { input: 'a-long-overlay-password' });
    await home.run(['config', 'set', 'gateway.overlay.mode', 'funnel']);
    const started = await home.run(['start']);
    expect(started.code, started.stderr).to.equal(0);
    expect(tailscale.calls()).to.deep.include(['funnel', '--bg', '--yes', String(port)]);
  });

  it('refuses to start (exit 78) without tailscale, logged out, or when serve is refused, naming the fix', async () => {
    await home.run(['config', 'set', 'gateway.overlay.mode', 'serve']);
    const missing = await home.run(['start'], { env: { PATH: '/usr/bin:/bin' } });
    expect(missing.code).to.equal(78);
    expect(missing.stderr).to.include('tailscale command is not installed');
    expect(missing.stderr).to.include('gateway config set gateway.overlay.mode off');

    tailscale.set({ backend: 'NeedsLogin', users: {} });
    const loggedOut = await home.run(['start']);
    expect(loggedOut.code).to.equal(78);
    expect(loggedOut.stderr).to.include('Tailscale is not up (NeedsLogin)');
    expect(loggedOut.stderr).to.include('tailscale up');

    tailscale.set({ backend: 'Running', fail: 'serve', users: {} });
    const refused = await home.run(['start']);
    expect(refused.code).to.equal(78);
    expect(refused.stderr).to.include('refused by the fake');
    expect((await home.run(['status'])).code).to.equal(3);
  });

  it('with allowOverlay, a request through tailscale serve is the user whois names, never the one its headers claim', async () => {
    await home.run(['config', 'set', 'gateway.overlay.mode', 'serve']);
    await home.run(['config', 'set', 'gateway.auth.allowOverlay', 'true']);
    expect((await home.run(['start'])).code).to.equal(0);
    const through = (login: string, address: string) => fetch(`http://127.0.0.1:${port}/jobs`, { headers: { 'tailscale-user-login': login, 'x-forwarded-for': address } });
    expect((await through('alice@example.com', '100.101.102.103')).status).to.equal(200);
    expect((await through('bob@example.com', '100.101.102.103')).status, 'a claim whois does not back').to.equal(401);
    expect((await through('alice@example.com', '100.101.102.104')).status, 'a peer whois does not know').to.equal(401);
    expect((await through('alice@example.com', '203.0.113.7')).status, 'not a tailnet address').to.equal(401);
    const whois = tailscale.calls().filter((call) => call[0] === 'whois');
    expect(whois.filter((call) => call[2] === '100.101.102.103'), 'cached').to.have.length(1);

    await home.run(['config', 'set', 'gateway.auth.allowOverlay', 'false']);
    expect((await through('alice@example.com', '100.101.102.103')).status).to.equal(401);
  });
});
