import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DAEMON_NODE_FLAGS } from '../../src/shared/run-args.ts';
import { freePort, Home, waitFor } from '../support/cli.ts';
import { FakeSystemd } from '../support/fake-systemd.ts';

/** systemd-analyze verify of a unit file, as the user manager or the system one reads it. */
function verify(path: string, user: boolean): { code: number | null; output: string } {
  const runtime = mkdtempSync(join(tmpdir(), 'xdg-runtime-'));
  const result = spawnSync('systemd-analyze', ['verify', ...(user ? ['--user'] : []), path], { encoding: 'utf8', env: { ...process.env, XDG_RUNTIME_DIR: runtime } });
  rmSync(runtime, { recursive: true, force: true });
  return { code: result.status, output: `${result.stdout}${result.stderr}`.trim() };
}

describe('gateway service: the daemon under systemd (e2e, recording fakes of systemctl, loginctl and journalctl)', function () {
  let home: Home;
  let systemd: FakeSystemd;
  let config: string;
  const unitDir = () => join(config, 'systemd', 'user');

  beforeEach(async () => {
    systemd = new FakeSystemd();
    config = mkdtempSync(join(tmpdir(), 'xdg-config-'));
    const port = await freePort();
    home = new Home({ GATEWAY_PORT: String(port), XDG_CONFIG_HOME: config, ...systemd.env() });
    await home.run(['profiles', 'create', 'default', '--secrets', 'file']);
    // The unit starts the daemon without the test's environment: the port is the profile's own, never the host's default.
    await home.run(['config', 'set', 'gateway.port', String(port)]);
    await home.run(['secrets', 'set', 'webhooks.github.secret'], { input: 'service-test-webhook-secret' });
  });
  afterEach(async () => {
    await home.run(['service', 'uninstall']).catch(() => undefined);
    home.cleanup();
    rmSync(config, { recursive: true, force: true });
  });

  it('installs a user unit that systemd-analyze accepts, runs its exact ExecStart to ready, holds no secret, and says lingering is off', async () => {
    const installed = await home.run(['service', 'install', '--json']);
    expect(installed.code, installed.stderr).to.equal(0);
    const result = installed.json as { unit: string; path: string; scope: string; pid: number; url: string; linger: boolean | null };
    expect(result.scope).to.equal('user');
    expect(result.unit).to.match(/^gateway-default-[0-9a-f]{12}\.service$/);
    expect(result.path).to.equal(join(unitDir(), result.unit));
    expect(result.linger).to.equal(false);
    expect(installed.stderr).to.include(`loginctl enable-linger`);

    const unit = readFileSync(result.path, 'utf8');
    const exec = /^ExecStart=(.*)$/m.exec(unit)![1]!.split(' ');
    expect(exec[0]).to.equal(process.execPath);
    // The daemon's node flags, then the executable.
    expect(exec.slice(1, 1 + DAEMON_NODE_FLAGS.length)).to.deep.equal([...DAEMON_NODE_FLAGS]);
    expect(exec[1 + DAEMON_NODE_FLAGS.length]).to.match(/^\/.*\/bin\/run\.js$/);
    expect(exec.slice(2 + DAEMON_NODE_FLAGS.length)).to.deep.equal(['run', '--profile', 'default']);
    expect(unit).to.match(/^Restart=on-failure$/m);
    expect(unit).to.match(/^RestartPreventExitStatus=78$/m);
    expect(unit).to.include(`Environment=GATEWAY_HOME=${home.dir}`);
    for (const secret of Object.values(home.secrets())) expect(unit).not.to.include(secret);
    const verified = verify(result.path, true);
    expect(verified.code, verified.output).to.equal(0);
    expect(verified.output).to.equal('');

    // The daemon systemd started: ready, logging to stdout only (the journal), no second log file.
    const status = await home.run(['status', '--json']);
    expect(status.code).to.equal(0);
    expect((status.json as any).pid).to.equal(result.pid);
    expect((status.json as any).service).to.deep.equal({ unit: result.unit, scope: 'user', active: 'active' });
    expect((await fetch(`${result.url}/healthz`)).status).to.equal(200);
    expect(existsSync(home.file('gateway.log'))).to.equal(false);
    await waitFor(() => systemd.journal(result.unit).includes('"msg":"daemon ready"') || undefined, 10_000, 'the ready line in the journal');
    const logs = await home.run(['service', 'logs', '-n', '5']);
    expect(logs.code).to.equal(0);
    expect(logs.stdout).to.include('daemon ready');
    expect(systemd.calls()).to.deep.include(['systemctl', '--user', 'enable', '--now', result.unit]);

    const serviceStatus = await home.run(['service', 'status', '--json']);
    expect(serviceStatus.code).to.equal(0);
    expect(serviceStatus.json).to.include({ installed: true, active: 'active', enabled: 'enabled', scope: 'user' });
  });

  it('takes over a daemon started by hand, then start, stop and restart act through systemctl: one supervisor', async () => {
    expect((await home.run(['start'])).code).to.equal(0);
    const byHand = home.lock().pid;
    const installed = await home.run(['service', 'install', '--json']);
    expect(installed.code, installed.stderr).to.equal(0);
    const { unit, pid, replaced } = installed.json as { unit: string; pid: number; replaced: number };
    expect(replaced).to.equal(byHand);
    expect(pid).not.to.equal(byHand);
    // Gone, or a zombie no one has reaped yet (a container's PID 1 may not reap).
    const state = existsSync(`/proc/${byHand}/stat`) ? readFileSync(`/proc/${byHand}/stat`, 'utf8').split(') ')[1]![0] : 'gone';
    expect(state).to.be.oneOf(['gone', 'Z']);

    const stopped = await home.run(['stop', '--json']);
    expect(stopped.code, stopped.stderr).to.equal(0);
    expect(stopped.json).to.include({ state: 'stopped', method: 'service', pid });
    expect(systemd.calls()).to.deep.include(['systemctl', '--user', 'stop', unit]);
    expect((await home.run(['status'])).code).to.equal(3);
    expect((await home.run(['service', 'status'])).code).to.equal(3);

    const started = await home.run(['start', '--json']);
    expect(started.code, started.stderr).to.equal(0);
    expect(started.json).to.include({ state: 'started', service: unit });
    expect(systemd.calls()).to.deep.include(['systemctl', '--user', 'start', unit]);
    const again = await home.run(['start', '--json']);
    expect(again.json).to.include({ state: 'already-running' });
    const refused = await home.run(['start', '--port', '1234']);
    expect(refused.code).to.equal(2);

    const restarted = await home.run(['restart', '--json']);
    expect(restarted.code, restarted.stderr).to.equal(0);
    expect((restarted.json as { pid: number }).pid).not.to.equal((started.json as { pid: number }).pid);
  });

  it('uninstall stops and disables the service and removes its unit; start then runs the daemon by itself again', async () => {
    const { unit, path } = (await home.run(['service', 'install', '--json'])).json as { unit: string; path: string };
    const removed = await home.run(['service', 'uninstall', '--json']);
    expect(removed.code, removed.stderr).to.equal(0);
    expect(removed.json).to.deep.equal({ profile: 'default', unit, removed: true });
    expect(existsSync(path)).to.equal(false);
    expect(systemd.calls()).to.deep.include(['systemctl', '--user', 'disable', '--now', unit]);
    expect((await home.run(['status'])).code).to.equal(3);
    expect((await home.run(['service', 'status'])).code).to.equal(5);
    const before = systemd.calls().length;
    expect((await home.run(['start'])).code).to.equal(0);
    expect(systemd.calls().length, 'no systemctl call').to.equal(before);
    await home.run(['stop']);
    const twice = await home.run(['service', 'uninstall']);
    expect(twice.code).to.equal(0);
    expect(twice.stdout).to.include('no service installed');
  });

  it('refuses what it cannot do with the right exit codes', async () => {
    expect((await home.run(['service', 'install', '--system'])).code).to.equal(2);
    expect((await home.run(['service', 'install', '--user', 'somebody-else'])).code).to.equal(2);
    const logs = await home.run(['service', 'logs']);
    expect(logs.code).to.equal(2);
    expect(logs.stderr).to.include('gateway logs');
    // No systemctl on PATH at all: a clear failure, and nothing left recorded as managed.
    const bare = new Home({ XDG_CONFIG_HOME: config, PATH: '/nonexistent', GATEWAY_PORT: String(await freePort()) }, home.dir);
    const without = await bare.run(['service', 'install']);
    expect(without.code).to.equal(1);
    expect(without.stderr).to.include('systemctl is not available');
    expect(existsSync(join(config, 'systemd')), 'no unit, and no folder made for one, left behind').to.equal(false);
    expect((await home.run(['status', '--json'])).json).not.to.have.property('service');
  });

  it('with no user systemd to reach (su, sudo -u, no login session) fails before it stops or writes anything: the daemon started by hand keeps running', async () => {
    expect((await home.run(['start'])).code).to.equal(0);
    const byHand = home.lock();
    const runtime = mkdtempSync(join(tmpdir(), 'xdg-runtime-'));
    const nowhere = { XDG_RUNTIME_DIR: runtime, DBUS_SESSION_BUS_ADDRESS: `unix:path=${join(runtime, 'bus')}` };
    const hostSystemctl = ['/usr/bin/systemctl', '/bin/systemctl'].find((path) => existsSync(path));
    const cases: [string, Record<string, string>][] = [['the recording fake', { ...nowhere, FAKE_SYSTEMD_NO_USER_BUS: '1' }]];
    // The host's own systemctl, its user bus pointing nowhere, as a new user met it.
    if (hostSystemctl) cases.push(['the host\'s systemctl', { ...nowhere, PATH: process.env.PATH! }]);
    try {
      for (const [name, env] of cases) {
        const failed = await home.run(['service', 'install', '--json'], { env });
        expect(failed.code, `${name}: ${failed.stdout}${failed.stderr}`).to.equal(1);
        const { error } = failed.json as { error: { message: string; hints: string[] } };
        expect(error.message, name).to.match(/^systemctl --user cannot reach \S+'s systemd \(.+\); nothing was installed or stopped\.$/);
        expect(error.hints.join('\n'), name).to.include('loginctl enable-linger').and.include('--system --user');
        expect(failed.stderr, name).not.to.include('Stopped the daemon');
        expect(existsSync(join(config, 'systemd')), `${name}: no folder made for a unit`).to.equal(false);
        expect(existsSync(home.file('service.json')), name).to.equal(false);
        // The daemon started by hand was never touched.
        expect(home.lock(), name).to.deep.equal(byHand);
        const status = await home.run(['status', '--json']);
        expect(status.code, name).to.equal(0);
        expect(status.json, name).to.include({ state: 'running', pid: byHand.pid }).and.not.have.property('service');
        expect((await fetch(`http://127.0.0.1:${byHand.port}/healthz`)).status, name).to.equal(200);
      }
      // The fake was asked whether it answers, and nothing else.
      expect(systemd.calls()).to.deep.equal([['systemctl', '--user', 'show-environment']]);
    } finally {
      rmSync(runtime, { recursive: true, force: true });
    }
  });

  it('a service that fails to start is taken back whole: no unit, no folder made for it, and the daemon started by hand runs again', async () => {
    expect((await home.run(['start'])).code).to.equal(0);
    const byHand = home.lock();
    // The unit's daemon finds its port taken (the environment file a unit reads), and exits.
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    writeFileSync(home.file('service.env'), `GATEWAY_PORT=${(blocker.address() as AddressInfo).port}\n`, { mode: 0o600 });
    try {
      const failed = await home.run(['service', 'install', '--timeout', '20000']);
      expect(failed.code, failed.stdout + failed.stderr).to.equal(1);
      expect(failed.stderr).to.match(/is failed: its daemon did not start/);
      expect(failed.stderr).to.match(/runs again as before, at http:\/\/127\.0\.0\.1:\d+ \(pid \d+\)/);
    } finally {
      blocker.close();
    }
    expect(existsSync(join(config, 'systemd')), 'no unit, and no folder made for one, left behind').to.equal(false);
    expect(existsSync(home.file('service.json'))).to.equal(false);
    const unit = systemd.calls().find((call) => call[2] === 'enable')?.at(-1);
    expect(systemd.calls()).to.deep.include(['systemctl', '--user', 'disable', '--now', unit]);
    const status = await home.run(['status', '--json']);
    expect(status.code).to.equal(0);
    expect(status.json).to.include({ state: 'running', port: byHand.port }).and.not.have.property('service');
    expect((status.json as { pid: number }).pid).not.to.equal(byHand.pid);
    expect((await fetch(`http://127.0.0.1:${byHand.port}/healthz`)).status).to.equal(200);
  });
});

describe('gateway service under launchd (e2e, a recording fake of launchctl; the property list as macOS reads it)', function () {
  let home: Home;
  let systemd: FakeSystemd;
  let userHome: string;

  beforeEach(async () => {
    systemd = new FakeSystemd();
    userHome = mkdtempSync(join(tmpdir(), 'mac-home-'));
    const port = await freePort();
    home = new Home({ GATEWAY_PORT: String(port), HOME: userHome, ...systemd.env() });
    await home.run(['profiles', 'create', 'default', '--secrets', 'file']);
    // launchd starts the agent without the test's environment: the port is the profile's own.
    await home.run(['config', 'set', 'gateway.port', String(port)]);
  });
  afterEach(async () => {
    await home.run(['service', 'uninstall']).catch(() => undefined);
    home.cleanup();
    rmSync(userHome, { recursive: true, force: true });
  });

  it('installs an agent whose property list runs the same command line, then start, stop, status and uninstall go through launchctl', async () => {
    const installed = await home.run(['service', 'install', '--manager', 'launchd', '--json']);
    expect(installed.code, installed.stderr).to.equal(0);
    const { unit, path, pid, manager } = installed.json as { unit: string; path: string; pid: number; manager: string };
    expect(manager).to.equal('launchd');
    expect(unit).to.match(/^dev\.gateway\.default\.[0-9a-f]{12}$/);
    expect(path).to.equal(join(userHome, 'Library', 'LaunchAgents', `${unit}.plist`));
    // Python's plistlib reads property lists as macOS writes them.
    const parsed = spawnSync('python3', ['-c', 'import json, plistlib, sys; print(json.dumps(plistlib.load(open(sys.argv[1], "rb"))))', path], { encoding: 'utf8' });
    expect(parsed.status, parsed.stderr).to.equal(0);
    const plist = JSON.parse(parsed.stdout);
    expect(plist.Label).to.equal(unit);
    expect(plist.ProgramArguments[0]).to.equal(process.execPath);
    expect(plist.ProgramArguments.slice(1)).to.deep.include.members([...DAEMON_NODE_FLAGS, 'run', '--profile', 'default']);
    expect(plist.EnvironmentVariables).to.deep.equal({ GATEWAY_HOME: home.dir });
    expect(plist).to.include({ RunAtLoad: true });
    expect(plist.KeepAlive).to.deep.equal({ SuccessfulExit: false });
    for (const secret of Object.values(home.secrets())) expect(readFileSync(path, 'utf8')).not.to.include(secret);
    expect(systemd.calls()).to.deep.include(['launchctl', 'bootstrap', `gui/${process.getuid!()}`, path]);

    expect(((await home.run(['status', '--json'])).json as any).service).to.deep.equal({ unit, scope: 'user', active: 'active' });
    expect(existsSync(home.file('gateway.log')), 'launchd keeps no journal: the daemon writes its file').to.equal(true);
    const stopped = await home.run(['stop', '--json']);
    expect(stopped.json).to.include({ state: 'stopped', method: 'service', pid });
    expect(systemd.calls()).to.deep.include(['launchctl', 'kill', 'SIGTERM', `gui/${process.getuid!()}/${unit}`]);
    const started = await home.run(['start', '--json']);
    expect(started.code, started.stderr).to.equal(0);
    expect(systemd.calls()).to.deep.include(['launchctl', 'kickstart', `gui/${process.getuid!()}/${unit}`]);
    const logs = await home.run(['service', 'logs', '-n', '3']);
    expect(logs.stdout).to.include('daemon ready');

    const removed = await home.run(['service', 'uninstall', '--json']);
    expect(removed.json).to.include({ removed: true });
    expect(existsSync(path)).to.equal(false);
    expect(systemd.calls()).to.deep.include(['launchctl', 'bootout', `gui/${process.getuid!()}/${unit}`]);
    expect((await home.run(['status'])).code).to.equal(3);
  });
});

describe('systemd units for every case pass systemd-analyze verify', function () {
  it('a system unit running as a named user, and paths with spaces', async () => {
    const { systemdUnit } = await import('../../src/cli/service.ts');
    const { profilePaths } = await import('../../src/shared/profile.ts');
    const dir = mkdtempSync(join(tmpdir(), 'unit with space-'));
    mkdirSync(join(dir, 'bin'));
    const { symlinkSync } = await import('node:fs');
    symlinkSync(process.execPath, join(dir, 'bin', 'node 24'));
    try {
      const paths = profilePaths('staging', join(dir, 'home'));
      for (const [scope, node] of [['system', process.execPath], ['user', join(dir, 'bin', 'node 24')]] as const) {
        const text = systemdUnit({ paths, scope, user: 'nobody', node, bin: join(dir, 'bin', 'run.js') });
        const file = join(dir, `gateway-staging-${scope}.service`);
        writeFileSync(file, text);
        if (scope === 'system') expect(text).to.match(/^User=nobody$/m);
        else expect(text).not.to.match(/^User=/m);
        const verified = verify(file, scope === 'user');
        expect(verified.code, `${scope}: ${verified.output}\n${text}`).to.equal(0);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
