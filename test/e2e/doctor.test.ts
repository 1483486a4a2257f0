import { expect } from 'chai';
import { chmodSync, existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { freePort, Home } from '../support/cli.ts';

interface Check { name: string; status: 'ok' | 'warn' | 'fail'; detail: string; fix?: string; fixed?: string }
const byName = (checks: Check[], name: string) => checks.find((check) => check.name === name)!;

describe('gateway doctor (e2e)', function () {
  let home: Home;
  let port: number;
  const doctor = async (...args: string[]) => {
    const result = await home.run(['doctor', '--json', ...args]);
    return { code: result.code, checks: (result.json as { checks: Check[] }).checks, stdout: result.stdout };
  };

  beforeEach(async () => {
    port = await freePort();
    home = new Home({ GATEWAY_PORT: String(port) });
    await home.run(['profiles', 'create', 'default', '--secrets', 'file']);
  });
  afterEach(() => home.cleanup());

  it('passes a healthy running profile, every check ok, exit 0', async () => {
    expect((await home.run(['start'])).code).to.equal(0);
    const { code, checks } = await doctor();
    expect(code).to.equal(0);
    expect(checks.map((check) => check.name)).to.include.members(['node', 'modes', 'config', 'exposure', 'lock', 'secrets', 'webhooks', 'service', 'disk', 'state', 'log', 'tokens', 'channels']);
    expect(checks.filter((check) => check.status !== 'ok'), JSON.stringify(checks)).to.deep.equal([]);
    const text = await home.run(['doctor']);
    expect(text.stdout).to.match(/^OK {3}config: /m);
    expect(text.stdout).to.include('0 failed, 0 warned');
  });

  it('names each problem with a fix that works, and --fix applies only the safe ones', async () => {
    expect((await home.run(['start'])).code).to.equal(0);
    const { pid } = home.lock();
    process.kill(pid, 'SIGKILL');
    await new Promise((resolve) => setTimeout(resolve, 300));
    chmodSync(home.file('secrets.json'), 0o644);
    writeFileSync(home.file('config.json'), JSON.stringify({ gateway: { port: 'x' }, log: { level: 'loud' } }));

    const found = await doctor();
    expect(found.code).to.equal(1);
    expect(byName(found.checks, 'modes')).to.include({ status: 'warn' });
    expect(byName(found.checks, 'modes').detail).to.include('secrets.json (644)');
    expect(byName(found.checks, 'lock')).to.include({ status: 'warn' });
    const config = byName(found.checks, 'config');
    expect(config.status).to.equal('fail');
    expect(config.detail).to.include('gateway.port');
    expect(config.fix).to.include('gateway config unset gateway.port');
    expect(config.fix).to.include('gateway config unset log.level');

    // The fixes it names work on the broken file, one problem at a time.
    for (const line of config.fix!.split('\n').filter((hint) => hint.startsWith('gateway config unset'))) {
      const key = line.split(' ')[3]!;
      const unset = await home.run(['config', 'unset', key]);
      expect(unset.code, `${line}: ${unset.stderr}`).to.equal(0);
    }
    const fixed = await doctor('--fix');
    expect(byName(fixed.checks, 'config')).to.include({ status: 'ok' });
    expect(byName(fixed.checks, 'modes').fixed).to.include('secrets.json 644 -> 600');
    expect(byName(fixed.checks, 'lock').fixed).to.include('removed');
    expect(statSync(home.file('secrets.json')).mode & 0o777).to.equal(0o600);
    expect(fixed.code).to.equal(0);
    expect((await doctor()).checks.filter((check) => check.status !== 'ok')).to.deep.equal([]);
  });

  it('says a keychain out of reach over SSH is a failure, with the commands that reach it or move the secrets', async () => {
    const identity = JSON.parse(readFileSync(home.file('profile.json'), 'utf8'));
    writeFileSync(home.file('profile.json'), JSON.stringify({ ...identity, secrets: 'keychain' }));
    const result = await home.run(['doctor', '--json'], { env: { DBUS_SESSION_BUS_ADDRESS: undefined, SSH_CONNECTION: '10.0.0.1 50000 10.0.0.2 22', XDG_RUNTIME_DIR: '/nonexistent' } });
    expect(result.code).to.equal(1);
    const keychain = byName((result.json as { checks: Check[] }).checks, 'keychain');
    expect(keychain.status).to.equal('fail');
    expect(keychain.detail).to.include('over SSH');
    expect(keychain.fix).to.include('dbus-run-session');
    expect(keychain.fix).to.include('gateway secrets move file --profile default');
  });

  it('fails when deliveries arrive without a webhook secret, warns of tokens expiring within 7 days, and names a port someone else holds', async () => {
    expect((await home.run(['start'])).code).to.equal(0);
    const refused = await fetch(`http://127.0.0.1:${port}/webhooks`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-github-event': 'ping' }, body: '{}' });
    expect(refused.status).to.equal(503);
    const token = await home.run(['tokens', 'create', '--name', 'soon', '--scope', 'jobs:read', '--expires-in', '2d', '--json']);
    const { id } = token.json as { id: string };
    const checks = (await doctor()).checks;
    expect(byName(checks, 'webhooks')).to.include({ status: 'fail' });
    expect(byName(checks, 'webhooks').fix).to.include('gateway secrets set webhooks.github.secret');
    expect(byName(checks, 'tokens')).to.include({ status: 'warn' });
    expect(byName(checks, 'tokens').detail).to.include(id);

    await home.run(['stop']);
    const squatter = createServer();
    await new Promise<void>((resolve) => squatter.listen(port, '127.0.0.1', resolve));
    try {
      const busy = byName((await doctor()).checks, 'port');
      expect(busy.status).to.equal('fail');
      expect(busy.detail).to.include(`127.0.0.1:${port}`);
    } finally {
      squatter.close();
    }
  });

  it('warns of an enabled channel that is not connected, naming its state', async () => {
    const closed = await freePort();
    await home.run(['config', 'set', 'channels.irc', JSON.stringify({ enabled: true, host: '127.0.0.1', port: closed, nick: 'doctorbot', reconnectMaxDelayMs: 2000 })]);
    expect((await home.run(['start'])).code).to.equal(0);
    const channels = byName((await doctor()).checks, 'channels');
    expect(channels.status).to.equal('warn');
    expect(channels.detail).to.match(/^irc\/default (connecting|disconnected|error)/);
    expect(channels.fix).to.include('gateway channels status');
  });

  it('says when the browser\'s Chromium is missing for an agent given the browser, and when web.search lacks its instance or key', async () => {
    const quiet = await doctor();
    expect(byName(quiet.checks, 'browser').status, 'no agent browses: nothing to warn of').to.equal('ok');
    expect(byName(quiet.checks, 'search')).to.include({ status: 'ok' });
    await home.run(['config', 'set', 'tools.browser.executablePath', '/nonexistent/chromium']);
    await home.run(['config', 'set', 'agents.coder', JSON.stringify({ model: 'local/m', toolProfile: 'coding' })]);
    await home.run(['config', 'set', 'tools.web.search.provider', 'brave']);
    const { checks } = await doctor();
    const browser = byName(checks, 'browser');
    expect(browser.status).to.equal('warn');
    expect(browser.detail).to.include('tools.browser.executablePath (/nonexistent/chromium) is not a program this daemon can run');
    expect(browser.fix).to.equal('gateway config unset tools.browser.executablePath');
    const search = byName(checks, 'search');
    expect(search.status).to.equal('warn');
    expect(search.fix).to.include('gateway secrets set tools.web.search.brave.apiKey');
    const secret = await home.run(['secrets', 'set', 'tools.web.search.brave.apiKey'], { input: 'BSA-key\n' });
    expect(secret.code, secret.stderr).to.equal(0);
    await home.run(['config', 'unset', 'tools.browser.executablePath']);
    const fixed = await doctor();
    expect(byName(fixed.checks, 'search').status).to.equal('ok');
    if (existsSync('/usr/lib/chromium/chromium') || existsSync('/usr/bin/chromium')) expect(byName(fixed.checks, 'browser').detail).to.match(/^Chromium at \//);
  });
});
