import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { assertProfileName, derivedPort, gatewayHome, isValidProfileName, profilePaths } from '../../../src/shared/profile.ts';
import { inspectDaemon, processStartTime, processState } from '../../../src/shared/daemon-lock.ts';
import { FileSecretStore } from '../../../src/shared/secrets/file-store.ts';
import { statSync, writeFileSync, mkdirSync, readFileSync } from 'node:fs';

describe('profiles', () => {
  it('validates names', () => {
    for (const name of ['default', 'a', 'staging-2', 'x_y', '0', 'a'.repeat(32)]) expect(isValidProfileName(name), name).to.equal(true);
    for (const name of ['', 'A', '-a', '_a', 'a b', 'a/b', '..', 'a'.repeat(33), 'é']) expect(isValidProfileName(name), name).to.equal(false);
    expect(() => assertProfileName('Nope')).to.throw(/Invalid profile name/).with.property('exitCode', 2);
  });

  it('derives stable ports below the ephemeral range', () => {
    expect(derivedPort('default')).to.equal(18789);
    for (const name of ['staging', 'qa', 'x', 'prod-eu-1']) {
      const port = derivedPort(name);
      expect(port).to.equal(derivedPort(name));
      expect(port).to.be.within(20000, 32767);
    }
    expect(derivedPort('staging', 1)).to.not.equal(derivedPort('staging'));
  });

  it('roots everything at GATEWAY_HOME, else XDG_CONFIG_HOME', () => {
    expect(gatewayHome({ GATEWAY_HOME: '/srv/gw' })).to.equal('/srv/gw');
    expect(gatewayHome({ XDG_CONFIG_HOME: '/cfg' })).to.equal('/cfg/gateway');
    const paths = profilePaths('qa', '/srv/gw');
    expect(paths).to.include({ dir: '/srv/gw/profiles/qa', config: '/srv/gw/profiles/qa/config.json', lock: '/srv/gw/profiles/qa/daemon.json' });
  });
});

describe('daemon lock', () => {
  let home: string;
  beforeEach(() => { home = mkdtempSync(join(tmpdir(), 'gateway-lock-')); });
  afterEach(() => rmSync(home, { recursive: true, force: true }));

  const writeLock = (pid: number, startTime: string, ready = true) => {
    const paths = profilePaths('default', home);
    mkdirSync(paths.dir, { recursive: true });
    writeFileSync(paths.lock, JSON.stringify({ pid, startTime, instanceId: 'i', profile: 'default', port: 1, bind: 'loopback', host: '127.0.0.1', version: '0', startedAt: 0, overrides: {}, ...(ready ? { readyAt: 1 } : {}) }));
    return paths;
  };

  it('reads live, starting, dead and reused pids', async () => {
    const child = spawn('sleep', ['30']);
    await new Promise((resolve) => child.once('spawn', resolve));
    try {
      const start = processStartTime(child.pid!)!;
      expect(inspectDaemon(writeLock(child.pid!, start)).state).to.equal('running');
      expect(inspectDaemon(writeLock(child.pid!, start, false)).state).to.equal('starting');
      expect(inspectDaemon(writeLock(child.pid!, `${start}0`))).to.include({ state: 'stale' });
    } finally {
      child.kill('SIGKILL');
    }
    await new Promise((resolve) => child.once('exit', resolve));
    expect(inspectDaemon(writeLock(2 ** 22 + 7, '1'))).to.include({ state: 'stale' });
  });

  it('treats a zombie as dead', async () => {
    // A child that is never reaped stays a zombie until this process waits for it.
    const child = spawn(process.execPath, ['-e', 'process.exit(0)'], { stdio: 'ignore' });
    const pid = child.pid!;
    child.removeAllListeners();
    await new Promise((resolve) => setTimeout(resolve, 300));
    const state = processState(pid);
    expect(['zombie', 'dead']).to.include(state);
  });
});

describe('file secret store', () => {
  it('writes a 0600 file atomically and reports damage without echoing content', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gateway-secrets-'));
    try {
      const store = new FileSecretStore(join(dir, 'secrets.json'));
      await store.set('gateway.token', 'abc');
      expect(await store.get('gateway.token')).to.equal('abc');
      expect(statSync(join(dir, 'secrets.json')).mode & 0o777).to.equal(0o600);
      expect(await store.list()).to.deep.equal(['gateway.token']);
      expect(await store.delete('gateway.token')).to.equal(true);
      expect(await store.delete('gateway.token')).to.equal(false);
      writeFileSync(join(dir, 'secrets.json'), 'topsecret{');
      try {
        await store.get('x');
        expect.fail('read a damaged file');
      } catch (error) {
        expect((error as Error).message).to.include('damaged').and.not.include('topsecret');
      }
      expect(readFileSync(join(dir, 'secrets.json'), 'utf8')).to.equal('topsecret{');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
