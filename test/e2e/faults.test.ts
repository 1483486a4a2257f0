import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { createHmac, randomUUID } from 'node:crypto';
import { closeSync, copyFileSync, mkdtempSync, openSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync, writeSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, Home, sleep, waitFor } from '../support/cli.ts';
import { RawSocket } from '../support/ws-client.ts';

const SECRET = 'fault-test-secret';

async function deliver(port: number, body = JSON.stringify({ ref: 'refs/heads/main', after: 'b'.repeat(40), repository: { id: 1, full_name: 'acme/w' }, head_commit: { id: 'c'.repeat(40), message: 'm'.repeat(500) }, commits: [] })) {
  const response = await fetch(`http://127.0.0.1:${port}/webhooks`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json', 'x-github-event': 'push', 'x-github-delivery': randomUUID(), 'x-github-hook-id': '1',
      'x-hub-signature-256': `sha256=${createHmac('sha256', SECRET).update(body).digest('hex')}`,
    },
    body,
  });
  return { status: response.status, headers: response.headers, body: await response.json() as any };
}

const rssKiB = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]);

describe('faults: a full disk, a damaged database, clients that leave or never read (e2e)', function () {
  let home: Home;
  let port: number;
  afterEach(() => home?.cleanup());

  it('stays up on a full disk: 503 for what it cannot store, the cause in status and readiness, recovery by itself', async function () {
    if (process.getuid?.() !== 0) {
      if (process.env.CI) throw new Error('the full-disk test mounts a tmpfs and needs root (CI runs as root)');
      this.skip();
    }
    const mount = mkdtempSync(join(tmpdir(), 'gateway-full-'));
    expect(spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=16m', 'tmpfs', mount]).status).to.equal(0);
    try {
      port = await freePort();
      home = new Home({ GATEWAY_PORT: String(port) }, mount);
      await home.run(['profiles', 'create', 'default', '--secrets', 'file']);
      await home.run(['secrets', 'set', 'webhooks.github.secret'], { input: SECRET });
      expect((await home.run(['start'])).code).to.equal(0);
      const pid = home.lock().pid;
      for (let i = 0; i < 10; i++) expect((await deliver(port)).status).to.equal(200);
      await home.run(['status']);

      // Fill the disk to the last byte.
      const filler = join(mount, 'filler');
      const fd = openSync(filler, 'w');
      const block = Buffer.alloc(1024 * 1024, 1);
      try {
        for (;;) writeSync(fd, block);
      } catch {
        for (;;) {
          try {
            writeSync(fd, Buffer.alloc(512, 1));
          } catch {
            break;
          }
        }
      } finally {
        closeSync(fd);
      }

      const answers = [];
      for (let i = 0; i < 40; i++) answers.push(await deliver(port));
      expect(answers.every((answer) => answer.status === 503), JSON.stringify(answers.map((answer) => answer.status))).to.equal(true);
      expect(answers[0]!.body.message).to.include('Nothing of this request was recorded');
      expect(answers[0]!.headers.get('retry-after')).to.equal('30');
      expect(() => process.kill(pid, 0)).to.not.throw();
      const ready = await fetch(`http://127.0.0.1:${port}/readyz`);
      expect(ready.status).to.equal(503);
      const status = await home.run(['status', '--json']);
      expect(status.code, status.stderr).to.equal(0);
      expect(status.json).to.include({ state: 'running' });
      expect(status.json.problems?.storage, JSON.stringify(status.json)).to.include("full");

      // Space comes back: readiness and deliveries recover without a restart, and nothing acknowledged was lost.
      rmSync(filler);
      await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200, 10_000, 'readiness to recover');
      for (let i = 0; i < 10; i++) expect((await deliver(port)).status).to.equal(200);
      const jobs = await home.run(['jobs', 'list', '--json', '--limit', '100']);
      expect(jobs.json.jobs.filter((job: { kind: string }) => job.kind === 'github.push')).to.have.length(20);
      expect(home.lock().pid).to.equal(pid);
      await home.run(['stop']);
    } finally {
      // The daemons go first (cleanup kills them; removing the mount point itself fails while it is mounted).
      try {
        home?.cleanup();
      } catch {
        // the mount point stays until it is unmounted
      }
      home = undefined as unknown as Home;
      spawnSync('umount', [mount]);
      rmSync(mount, { recursive: true, force: true });
    }
  });

  it('refuses a damaged or emptied state.db, naming it and the way out, and leaves it as it is', async () => {
    home = new Home({ GATEWAY_PORT: String(await freePort()) });
    await home.run(['profiles', 'create', 'default', '--secrets', 'file']);
    expect((await home.run(['start'])).code).to.equal(0);
    await home.run(['stop']);
    const db = home.file('state.db');
    const good = join(home.dir, 'good.db');
    copyFileSync(db, good);

    truncateSync(db, 0);
    const empty = await home.run(['start', '--json']);
    expect(empty.code).to.equal(1);
    expect(empty.json.error.message).to.include(db).and.include('empty (0 bytes)');
    expect(empty.json.error.hints.join('\n')).to.include(`mv ${db} ${db}.broken`);
    expect(statSync(db).size).to.equal(0);

    const damaged = Buffer.concat([readFileSync(good).subarray(0, 100), Buffer.from('x'.repeat(5000))]);
    writeFileSync(db, damaged);
    const broken = await home.run(['start', '--json']);
    expect(broken.code).to.equal(1);
    expect(broken.json.error.message).to.include(db).and.include('is damaged');
    expect(readFileSync(db).equals(damaged)).to.equal(true);

    // The way out works: set aside, the profile starts with empty state.
    copyFileSync(good, db);
    expect((await home.run(['start'])).code).to.equal(0);
    await home.run(['stop']);
  });

  it('takes a client that aborts its upload as an ordinary event: nothing at error level in the log', async () => {
    port = await freePort();
    home = new Home({ GATEWAY_PORT: String(port) });
    await home.run(['profiles', 'create', 'default', '--secrets', 'file']);
    await home.run(['secrets', 'set', 'webhooks.github.secret'], { input: SECRET });
    expect((await home.run(['start'])).code).to.equal(0);
    const token = home.token();
    for (const path of ['/tools/invoke', '/webhooks', '/tokens', '/v1/chat/completions']) {
      await new Promise<void>((resolve) => {
        const socket = connect(port, '127.0.0.1', () => {
          socket.write(`POST ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nX-GitHub-Event: push\r\nX-GitHub-Delivery: d1\r\nContent-Length: 1000\r\n\r\n{"a":`);
          setTimeout(() => { socket.destroy(); resolve(); }, 100);
        });
      });
    }
    await sleep(300);
    expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).to.equal(200);
    const errors = readFileSync(home.file('gateway.log'), 'utf8').split('\n').filter((line) => line.includes('"level":50'));
    expect(errors).to.deep.equal([]);
    await home.run(['stop']);
  });

  it('closes a WebSocket client that does not read its answers, and holds a bounded amount for it', async () => {
    port = await freePort();
    home = new Home({ GATEWAY_PORT: String(port) });
    await home.run(['profiles', 'create', 'default', '--secrets', 'file']);
    await home.run(['secrets', 'set', 'webhooks.github.secret'], { input: SECRET });
    expect((await home.run(['start'])).code).to.equal(0);
    for (let i = 0; i < 200; i++) await deliver(port);
    const pid = home.lock().pid;
    const before = rssKiB(pid);

    const client = new RawSocket(`ws://127.0.0.1:${port}/`);
    expect((await client.connect({ token: home.token() })).ok).to.equal(true);
    // Stop reading: the kernel's buffers fill, then the daemon's.
    (client.socket as unknown as { _socket: { pause(): void } })._socket.pause();
    // In waves the daemon answers whole (64 in flight at most; more at once would be refused with small frames).
    for (let i = 0; i < 1500; i++) {
      client.send({ type: 'req', id: `q${i}`, method: 'jobs.list', params: { limit: 200 } });
      if (i % 32 === 31) await new Promise((resolve) => setTimeout(resolve, 5));
    }
    let peak = 0;
    const logged = () => readFileSync(home.file('gateway.log'), 'utf8').includes('closed a client that does not read its answers');
    await waitFor(() => {
      peak = Math.max(peak, rssKiB(pid));
      return logged();
    }, 30_000, 'the daemon to close the client');
    expect((peak - before) / 1024, `RSS grew from ${before} KiB to ${peak} KiB`).to.be.below(150);
    (client.socket as unknown as { _socket: { resume(): void } })._socket.resume();
    await client.closed;
    // Everyone else is served as before.
    const other = new RawSocket(`ws://127.0.0.1:${port}/`);
    expect((await other.connect({ token: home.token() })).ok).to.equal(true);
    expect((await other.call('health')).payload.ok).to.equal(true);
    other.close();
    await home.run(['stop']);
  });
});
