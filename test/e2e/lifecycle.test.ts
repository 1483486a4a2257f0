import { expect } from 'chai';
import { readFileSync, rmSync, statSync, existsSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { freePort, Home, PLUGIN_FIXTURES, spawnForeground, waitFor } from '../support/cli.ts';
import { RawSocket } from '../support/ws-client.ts';

describe('daemon lifecycle (e2e)', function () {
  let home: Home;
  let port: number;

  beforeEach(async () => {
    port = await freePort();
    home = new Home({ GATEWAY_PORT: String(port) });
  });
  afterEach(() => home.cleanup());

  it('starts, reports status, serves probes and stops', async () => {
    const started = await home.run(['start', '--json']);
    expect(started.code, started.stderr).to.equal(0);
    expect(started.json).to.include({ profile: 'default', state: 'started', port });
    expect(started.json.url).to.equal(`http://127.0.0.1:${port}`);

    const status = await home.run(['status', '--json']);
    expect(status.code).to.equal(0);
    expect(status.json).to.include({ profile: 'default', state: 'running', port, bind: 'loopback', secretStore: 'file' });
    expect(status.json.pid).to.equal(started.json.pid);
    expect(status.json.rpc).to.deep.equal({ ok: true });
    expect(status.json.uptimeMs).to.be.a('number');
    expect(status.json.version).to.match(/^\d+\.\d+\.\d+/);
    expect(status.json.logFile).to.equal(home.file('gateway.log'));

    // Files the profile owns, with their modes.
    expect(statSync(home.profileDir()).mode & 0o777).to.equal(0o700);
    expect(statSync(home.file('profile.json')).mode & 0o777).to.equal(0o600);
    expect(statSync(home.file('secrets.json')).mode & 0o777).to.equal(0o600);
    expect(statSync(home.file('state.db')).mode & 0o777).to.equal(0o600);
    expect(home.lock()).to.include({ pid: started.json.pid, port, profile: 'default' });
    const token = home.token();
    expect(Buffer.from(token, 'base64url').length).to.be.at.least(32);
    expect(readFileSync(home.file('profile.json'), 'utf8')).not.to.include(token);
    expect(readFileSync(home.file('gateway.log'), 'utf8')).not.to.include(token);

    const live = await fetch(`http://127.0.0.1:${port}/healthz`);
    expect(live.status).to.equal(200);
    expect(live.headers.get('cache-control')).to.equal('no-store');
    expect(await live.json()).to.deep.equal({ ok: true, status: 'live' });
    const ready = await fetch(`http://127.0.0.1:${port}/readyz`);
    expect(await ready.json()).to.deep.equal({ ok: true, status: 'ready' });
    for (const path of ['/health', '/ready']) expect((await fetch(`http://127.0.0.1:${port}${path}`)).status).to.equal(200);
    const head = await fetch(`http://127.0.0.1:${port}/healthz`, { method: 'HEAD' });
    expect(head.status).to.equal(200);
    expect(await head.text()).to.equal('');
    const post = await fetch(`http://127.0.0.1:${port}/healthz`, { method: 'POST' });
    expect(post.status).to.equal(405);
    expect(post.headers.get('allow')).to.equal('GET, HEAD');
    expect(await post.json()).to.include({ statusCode: 405 });
    const missing = await fetch(`http://127.0.0.1:${port}/nope`);
    expect(missing.status).to.equal(404);
    expect(await missing.json()).to.deep.equal({ error: 'not_found', message: 'No route for GET /nope.', statusCode: 404 });

    // ps, top and ss name the daemon and its profile (not Node's MainThread); status and stop still find it by its lock.
    if (process.platform === 'linux') {
      expect(readFileSync(`/proc/${started.json.pid}/comm`, 'utf8')).to.equal('gateway-daemon\n');
      expect(readFileSync(`/proc/${started.json.pid}/cmdline`, 'utf8').replace(/\0+$/, '')).to.equal('gateway-daemon default');
    }

    const stopped = await home.run(['stop', '--json']);
    expect(stopped.code).to.equal(0);
    expect(stopped.json).to.include({ state: 'stopped', pid: started.json.pid, method: 'rpc' });
    expect(existsSync(home.file('daemon.json'))).to.equal(false);
    await fetch(`http://127.0.0.1:${port}/healthz`).then(() => expect.fail('port still open'), () => undefined);

    const after = await home.run(['status', '--json']);
    expect(after.code).to.equal(3);
    expect(after.json).to.include({ state: 'stopped', pid: null });
    const again = await home.run(['stop']);
    expect(again.code).to.equal(0);
    expect(again.stdout).to.include('is not running');
  });

  it('says so when starting a running profile, and yields one daemon under concurrent starts', async () => {
    const results = await Promise.all([1, 2, 3].map(() => home.run(['start', '--json'])));
    for (const result of results) expect(result.code, result.stderr).to.equal(0);
    const pids = new Set(results.map((result) => result.json.pid));
    expect(pids.size).to.equal(1);
    expect(results.filter((result) => result.json.state === 'started')).to.have.length(1);
    const again = await home.run(['start']);
    expect(again.code).to.equal(0);
    expect(again.stdout).to.include('already running');
  });

  it('waits for a half-started daemon instead of starting a second one', async () => {
    // A plugin that takes 1.5 s to register holds the daemon between taking the lock and being ready.
    await home.run(['config', 'set', 'plugins.load', JSON.stringify([join(PLUGIN_FIXTURES, 'slow-start')])]);
    const slow = home.run(['start', '--json']);
    await waitFor(() => existsSync(home.file('daemon.json')), 10_000, 'the lock');
    const second = await home.run(['start', '--json']);
    const first = await slow;
    expect(first.code, first.stderr).to.equal(0);
    expect(second.code, second.stderr).to.equal(0);
    expect(second.json.state).to.equal('already-running');
    expect(second.json.pid).to.equal(first.json.pid);
  });

  it('reports a daemon killed with SIGKILL as stale (exit 4) and start reclaims it', async () => {
    const started = await home.run(['start', '--json']);
    process.kill(started.json.pid, 'SIGKILL');
    await waitFor(async () => (await home.run(['status', '--json'])).code === 4, 10_000, 'stale status');
    const stale = await home.run(['status', '--json']);
    expect(stale.json).to.include({ state: 'stale', pid: started.json.pid });
    expect(stale.json.reason).to.match(/gone|zombie/);
    const reclaimed = await home.run(['start', '--json']);
    expect(reclaimed.code, reclaimed.stderr).to.equal(0);
    expect(reclaimed.json.state).to.equal('started');
    expect(reclaimed.json.pid).to.not.equal(started.json.pid);
    expect((await home.run(['status'])).code).to.equal(0);
  });

  it('stops by itself when its profile is removed under it, giving its port back', async () => {
    const started = await home.run(['start', '--json']);
    expect(started.code, started.stderr).to.equal(0);
    const alive = (pid: number) => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    expect(alive(started.json.pid)).to.equal(true);
    rmSync(home.profileDir(), { recursive: true, force: true });
    await waitFor(async () => !alive(started.json.pid), 20_000, 'the daemon to stop');
    // Its port is free again: a new daemon of the profile starts on it.
    const again = await home.run(['start', '--json']);
    expect(again.code, again.stderr).to.equal(0);
    expect(again.json.port).to.equal(port);
  });

  it('treats a lock whose pid now belongs to another process as stale', async () => {
    const { mkdirSync } = await import('node:fs');
    const { spawn } = await import('node:child_process');
    const other = spawn('sleep', ['30'], { stdio: 'ignore' });
    after(() => other.kill());
    mkdirSync(home.profileDir(), { recursive: true, mode: 0o700 });
    writeFileSync(home.file('daemon.json'), JSON.stringify({
      pid: other.pid, startTime: '1', instanceId: 'old', profile: 'default', port, bind: 'loopback', host: '127.0.0.1',
      version: '0.0.0', startedAt: Date.now() - 1000, readyAt: Date.now() - 900, overrides: {},
    }));
    const status = await home.run(['status', '--json']);
    expect(status.code).to.equal(4);
    expect(status.json.reason).to.include('another process');
  });

  it('refuses a port another profile holds, naming the port and the profile (exit 1)', async () => {
    const first = await home.run(['start']);
    expect(first.code, first.stderr).to.equal(0);
    const second = await home.run(['start', '--profile', 'other', '--json']);
    expect(second.code).to.equal(1);
    expect(second.json.error.message).to.include(`Port ${port}`).and.to.include('profile "default"');
    expect(second.stderr).to.include(`Port ${port}`);
    expect(existsSync(home.file('daemon.json', 'other'))).to.equal(false);
  });

  it('refuses a port a foreign process holds (exit 1)', async () => {
    const blocker: Server = createServer();
    await new Promise<void>((resolve) => blocker.listen(port, '127.0.0.1', () => resolve()));
    try {
      const result = await home.run(['start']);
      expect(result.code).to.equal(1);
      expect(result.stderr).to.include(`Port ${port} on 127.0.0.1 is already in use by another process`);
    } finally {
      blocker.close();
    }
  });

  it('restarts with the --port it was started with and a new pid', async () => {
    const other = await freePort();
    const started = await home.run(['start', '--port', String(other), '--json'], { env: { GATEWAY_PORT: undefined } });
    expect(started.json.port).to.equal(other);
    const restarted = await home.run(['restart', '--json'], { env: { GATEWAY_PORT: undefined } });
    expect(restarted.code, restarted.stderr).to.equal(0);
    expect(restarted.json.port).to.equal(other);
    expect(restarted.json.pid).to.not.equal(started.json.pid);
  });

  it('runs in the foreground and shuts down gracefully on SIGTERM, closing WebSockets with 1001', async () => {
    const child = spawnForeground(['run'], home.env);
    let stderr = '';
    child.stderr!.on('data', (chunk) => { stderr += chunk; });
    await waitFor(() => stderr.includes('listening on'), 15_000, 'foreground ready');
    if (process.platform === 'linux') expect(readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').replace(/\0+$/, '')).to.equal('gateway-daemon default');
    const token = home.token();
    const socket = new RawSocket(`ws://127.0.0.1:${port}/`);
    const hello = await socket.connect({ token });
    expect(hello.ok).to.equal(true);
    // Nothing here would start a foreground daemon again: it refuses to restart itself, and runs on.
    const restart = await socket.call('restart');
    expect(restart.ok).to.equal(false);
    expect(restart.error.message).to.match(/runs in the foreground.*nothing here would start it again/);
    expect((await socket.call('health')).payload).to.deep.equal({ ok: true, status: 'ready' });
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    child.kill('SIGTERM');
    await socket.closed;
    expect(socket.closeCode).to.equal(1001);
    expect(await exited).to.equal(0);
    expect(existsSync(home.file('daemon.json'))).to.equal(false);
  });

  it('refuses run flags that do not fit before anything starts: a bad profile name, port or bind mode (exit 2)', async () => {
    for (const args of [['--profile', 'Not A Profile'], ['--port', 'abc'], ['--port', '70000'], ['--bind', 'everywhere'], ['--unknown'], ['extra']]) {
      const result = await home.run(['run', ...args, '--detached']);
      expect(result.code, args.join(' ')).to.equal(2);
      expect(result.stderr, args.join(' ')).to.match(/^Error: /);
    }
    const json = await home.run(['run', '--profile', '../etc', '--json']);
    expect(json.code).to.equal(2);
    expect(json.json.error).to.include({ code: 'USAGE', exitCode: 2 });
    expect(json.json.error.message).to.include('Invalid profile name');
    expect(existsSync(home.profileDir())).to.equal(false);
  });

  it('passes the daemon\'s start-up failure and exit code on to start', async () => {
    const { mkdirSync } = await import('node:fs');
    mkdirSync(home.profileDir(), { recursive: true, mode: 0o700 });
    writeFileSync(home.file('config.json'), JSON.stringify({ secrets: { backend: 'file' }, gateway: { auth: { mode: 'password' } } }));
    const result = await home.run(['start', '--json']);
    expect(result.code).to.equal(78);
    expect(result.json.error.message).to.include('gateway.auth.mode is password');
    expect(result.json.error.hints.join(' ')).to.include('gateway secrets set gateway.password');
  });

  it('shows the log with -n, as JSON and raw', async () => {
    await home.run(['start']);
    const json = await home.run(['logs', '-n', '2', '--json']);
    expect(json.code).to.equal(0);
    expect(json.json.entries).to.have.length(2);
    expect(json.json.entries.at(-1).msg).to.equal('daemon ready');
    const raw = await home.run(['logs', '-n', '1', '--raw']);
    expect(JSON.parse(raw.stdout.trim()).msg).to.equal('daemon ready');
    const follow = await home.run(['logs', '-f', '--json']);
    expect(follow.code).to.equal(2);
  });
});

describe('daemon details (e2e)', function () {
  let home: Home;
  let port: number;
  beforeEach(async () => {
    port = await freePort();
    home = new Home({ GATEWAY_PORT: String(port) });
  });
  afterEach(() => home.cleanup());

  it('binds to every interface with --bind lan, for this run only, with token auth', async () => {
    // Not announced on this machine's own network.
    await home.run(['config', 'set', 'gateway.discovery.mdns.enabled', 'false']);
    const started = await home.run(['start', '--bind', 'lan', '--json']);
    expect(started.code, started.stderr).to.equal(0);
    const status = await home.run(['status', '--json']);
    expect(status.json).to.include({ bind: 'lan', state: 'running' });
    expect(status.json.rpc.ok).to.equal(true);
    expect(home.lock()).to.include({ host: '0.0.0.0', bind: 'lan' });
    const config = await home.run(['config', 'get', 'gateway.bind', '--json']);
    expect(config.json).to.include({ value: 'loopback', source: 'default' });
  });

  it('logs at debug level with --verbose, and gives start-up memory back before its first client', async () => {
    await home.run(['start', '--verbose']);
    const token = home.token();
    // Straight after ready, as a script's `start && status` would.
    const socket = new RawSocket(`ws://127.0.0.1:${port}/`);
    await socket.connect({ token });
    socket.close();
    await waitFor(() => readFileSync(home.file('gateway.log'), 'utf8').includes('"client connected"'), 5000, 'a debug line');
    const lines = readFileSync(home.file('gateway.log'), 'utf8').trim().split('\n').map((line) => JSON.parse(line) as { level: number; msg: string });
    expect(lines.some((line) => line.level === 20)).to.equal(true);
    const settled = lines.findIndex((line) => line.msg === 'gave start-up memory back');
    expect(settled, 'the start-up collection ran').to.be.above(-1);
    expect(settled).to.be.below(lines.findIndex((line) => line.msg === 'client connected'));
  });

  it('follows the log with -f', async () => {
    await home.run(['start']);
    const follower = spawnForeground(['logs', '-f', '--raw', '-n', '0'], home.env);
    let out = '';
    follower.stdout!.on('data', (chunk) => { out += chunk; });
    try {
      await new Promise((resolve) => setTimeout(resolve, 500));
      await home.run(['config', 'set', 'log.level', 'debug']);
      await waitFor(() => out.includes('configuration changed'), 10_000, 'the followed line');
      expect(JSON.parse(out.trim().split('\n').at(-1)!)).to.include({ msg: 'configuration changed', key: 'log.level' });
    } finally {
      follower.kill();
    }
  });

  it('closes a WebSocket that does not connect within the handshake timeout (1008)', async function () {
    this.timeout(20_000);
    await home.run(['start']);
    const socket = new RawSocket(`ws://127.0.0.1:${port}/`);
    await socket.opened();
    const opened = Date.now();
    await socket.closed;
    expect(socket.closeCode).to.equal(1008);
    expect(Date.now() - opened).to.be.within(9_000, 12_000);
  });
});
