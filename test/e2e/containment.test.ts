import { expect } from 'chai';
import { existsSync, lstatSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort, Home } from '../support/cli.ts';

const TOKEN = 'containment-gateway-token-for-tests';

/**
 * The tools' containment under concurrency, as an attacker with an
 * exec-capable agent would try it: a command in the sandbox changes the
 * workspace while files.* calls run against it.
 */
describe('containment under concurrency: files.* against a command racing them (e2e)', function () {
  this.timeout(120_000);
  let home: Home;
  let base: string;
  const profile = () => join(home.file('config.json'), '..');
  const workspace = () => join(profile(), 'workspace');
  const invoke = async (tool: string, args: Record<string, unknown>, waitMs = 15_000) => {
    const response = await fetch(`${base}/tools/invoke`, {
      method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify({ tool, args }),
      signal: AbortSignal.timeout(waitMs),
    });
    return { status: response.status, body: await response.json() as any };
  };

  beforeEach(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    home = new Home({ GATEWAY_PORT: String(port), GATEWAY_TOKEN: TOKEN });
    await home.set('gateway.tools.allow', ['exec', 'files.write', 'files.edit']);
    await home.set('tools.exec.approval', 'full');
    expect((await home.run(['start'])).code).to.equal(0);
  });
  afterEach(() => home.cleanup());

  it('a folder swapped for a link to the profile thousands of times a second: for 20 s no read, write, edit or list reaches outside', async () => {
    const setup = await invoke('exec', { command: `mkdir d && echo decoy > d/secret.txt && echo decoy > d/notes.txt && echo inside > d/plain.txt && ln -s ${profile()} lnk && echo ready` });
    expect(setup.body.result?.stdout, JSON.stringify(setup.body)).to.equal('ready\n');
    writeFileSync(join(profile(), 'notes.txt'), 'decoy\n');
    writeFileSync(join(profile(), 'secret.txt'), 'TOP-SECRET\n', { mode: 0o600 });
    const notesInode = statSync(join(profile(), 'notes.txt')).ino;

    // The swap: d and the link exchanged in one step (renameat2 RENAME_EXCHANGE), so d is always there, a folder or the link.
    const swapper = `import ctypes, time
libc = ctypes.CDLL(None, use_errno=True)
end = time.time() + 24
n = 0
while time.time() < end:
    if libc.renameat2(-100, b'd', -100, b'lnk', 2) != 0: raise OSError(ctypes.get_errno(), 'renameat2')
    n += 1
print(n)`;
    const racing = invoke('exec', { command: `python3 -c "${swapper}"`, timeout: 40 }, 60_000).catch((error) => ({ status: 0, body: { error: String(error) } }));
    await new Promise((resolve) => setTimeout(resolve, 500));

    const counts = { read: 0, write: 0, edit: 0, list: 0, refused: 0, breaches: [] as string[] };
    const until = Date.now() + 20_000;
    const worker = async (index: number) => {
      for (let round = 0; Date.now() < until; round++) {
        const kind = (index + round) % 4;
        if (kind === 0) {
          const read = await invoke('files.read', { path: (round % 3 === 0) ? 'd/config.json' : 'd/secret.txt' });
          if (read.status === 200) {
            counts.read++;
            if (read.body.result.content !== 'decoy\n') counts.breaches.push(`read ${read.body.result.content.slice(0, 60)}`);
          } else counts.refused++;
        } else if (kind === 1) {
          const written = await invoke('files.write', { path: `d/planted-${index}-${round}.txt`, content: 'planted' });
          if (written.status === 200) counts.write++;
          else counts.refused++;
        } else if (kind === 2) {
          const edited = await invoke('files.edit', { path: 'd/notes.txt', oldText: 'decoy', newText: 'decoy' });
          if (edited.status === 200) counts.edit++;
          else counts.refused++;
        } else {
          const listed = await invoke('files.list', { path: 'd' });
          if (listed.status === 200) {
            counts.list++;
            const names = listed.body.result.entries.map((entry: any) => entry.path);
            if (names.some((name: string) => /config\.json|workspace$/.test(name))) counts.breaches.push(`list ${names.join(',')}`);
          } else counts.refused++;
        }
      }
    };
    await Promise.all([0, 1, 2, 3].map(worker));
    const swaps = await racing;
    expect(swaps.status, JSON.stringify(swaps.body)).to.equal(200);
    expect(Number(swaps.body.result.stdout.trim()), `the command swapped the folder many times: ${JSON.stringify(swaps.body.result)}`).to.be.above(10_000);

    console.log(`      ${swaps.body.result.stdout.trim()} swaps; ${JSON.stringify({ ...counts, breaches: counts.breaches.length })}`);
    expect(counts.breaches, 'nothing outside the workspace was read or listed').to.deep.equal([]);
    expect(readdirSync(profile()).filter((name) => name.startsWith('planted')), 'nothing was written outside').to.deep.equal([]);
    expect(statSync(join(profile(), 'notes.txt')).ino, 'the profile\'s file was never replaced').to.equal(notesInode);
    // Each kind of call got through at times: the race was really run.
    for (const kind of ['read', 'write', 'edit', 'list'] as const) expect(counts[kind], kind).to.be.above(0);
    // Every write that succeeded is in the real folder, under whichever name the swap left it.
    const real = ['d', 'lnk'].map((name) => join(workspace(), name)).find((path) => lstatSync(path).isDirectory())!;
    expect(readdirSync(real).filter((name) => name.startsWith('planted')).length).to.equal(counts.write);
  });

  it('a FIFO, or a file swapped with one, is refused at once: other tools go on answering', async () => {
    const setup = await invoke('exec', { command: 'mkfifo pipe && mkdir e && mkfifo e/f && echo text > regular && python3 -c "import socket; s = socket.socket(socket.AF_UNIX); s.bind(\'sock\')" && echo ready' });
    expect(setup.body.result?.stdout, JSON.stringify(setup.body)).to.equal('ready\n');
    for (const path of ['pipe', 'e/f', 'sock']) {
      const read = await invoke('files.read', { path });
      expect(read.status, path).to.equal(400);
      expect(read.body.message).to.match(/not a regular file/);
      const written = await invoke('files.write', { path, content: 'x' });
      expect(written.status, path).to.equal(400);
    }
    expect((await invoke('files.list', { path: '.' })).body.result.entries).to.deep.include({ path: 'pipe', type: 'other', bytes: null });

    // A file swapped with a FIFO while reads of it run, more of them than Node has I/O threads.
    const swapper = `import os, time
os.mkfifo('fifo')
end = time.time() + 8
while time.time() < end:
    os.rename('regular', 'held'); os.rename('fifo', 'regular'); os.rename('regular', 'fifo'); os.rename('held', 'regular')`;
    const racing = invoke('exec', { command: `python3 -c "${swapper}"`, timeout: 20 });
    await new Promise((resolve) => setTimeout(resolve, 300));
    const statuses = await Promise.all(Array.from({ length: 64 }, () => invoke('files.read', { path: 'regular' }).then((answer) => answer.status)));
    expect(statuses.every((status) => status === 200 || status === 400 || status === 404), statuses.join(',')).to.equal(true);
    expect((await racing).status).to.equal(200);
    // Nothing is left hanging: exec, files and the probes answer at once.
    const started = Date.now();
    expect((await invoke('exec', { command: 'true' })).status).to.equal(200);
    expect((await invoke('files.read', { path: 'regular' })).body.result.content).to.equal('text\n');
    expect((await fetch(`${base}/healthz`)).status).to.equal(200);
    expect(Date.now() - started).to.be.below(10_000);
    expect(existsSync(join(workspace(), 'regular'))).to.equal(true);
  });

  it('links inside the workspace are followed as the sandbox shows them; written through, the file lands where the link leads', async () => {
    const setup = await invoke('exec', { command: 'mkdir -p a/b && echo hi > a/b/f && ln -s a/b/f rel && ln -s /workspace/a/b abs && ln -s ../x a/up && ln -s up a/loop1 && ln -s loop1 a/up2 && echo ready' });
    expect(setup.body.result?.stdout, JSON.stringify(setup.body)).to.equal('ready\n');
    expect((await invoke('files.read', { path: 'rel' })).body.result).to.include({ path: 'a/b/f', content: 'hi\n' });
    expect((await invoke('files.read', { path: 'abs/f' })).body.result).to.include({ path: 'a/b/f', content: 'hi\n' });
    expect((await invoke('files.read', { path: '/workspace/abs/f' })).body.result).to.include({ content: 'hi\n' });
    expect((await invoke('files.write', { path: 'abs/g', content: 'through' })).body.result).to.include({ path: 'a/b/g', created: true });
    expect(readFileSync(join(workspace(), 'a', 'b', 'g'), 'utf8')).to.equal('through');
    expect((await invoke('files.read', { path: 'a/up2' })).status, 'a link to a missing file').to.equal(404);
    expect((await invoke('files.list', { path: 'abs' })).body.result.entries.map((entry: any) => entry.path)).to.deep.equal(['a/b/f', 'a/b/g']);
    const listed = (await invoke('files.list', { path: '.' })).body.result.entries;
    expect(listed).to.deep.include({ path: 'rel', type: 'link', bytes: null });
  });

  it('names longer than the file system takes are the caller\'s error, not the gateway\'s', async () => {
    const long = 'n'.repeat(300);
    for (const tool of ['files.read', 'files.write', 'files.list']) {
      const answer = await invoke(tool, tool === 'files.write' ? { path: `folder/${long}`, content: 'x' } : { path: long });
      expect(answer.status, tool).to.equal(400);
      expect(answer.body.message).to.match(/longer than the file system takes \(255 bytes a name/);
    }
  });
});

describe('containment of exec: limits for a command and all it starts, a sandbox without namespaces or host paths (e2e)', function () {
  this.timeout(120_000);
  let home: Home;
  let base: string;
  const workspace = () => join(home.file('config.json'), '..', 'workspace');
  const exec = async (command: string, timeout = 60, token = TOKEN) => {
    const response = await fetch(`${base}/tools/invoke`, {
      method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify({ tool: 'exec', args: { command, timeout } }),
    });
    return { status: response.status, headers: response.headers, body: await response.json() as any };
  };
  const usedMB = (folder: string): number => {
    let bytes = 0;
    for (const name of readdirSync(folder)) {
      const info = lstatSync(join(folder, name));
      bytes += info.blocks * 512;
      if (info.isDirectory()) bytes += usedMB(join(folder, name)) * 1024 * 1024;
    }
    return bytes / 1024 / 1024;
  };

  beforeEach(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    home = new Home({ GATEWAY_PORT: String(port), GATEWAY_TOKEN: TOKEN });
    await home.set('gateway.tools.allow', ['exec']);
    await home.set('tools.exec.approval', 'full');
    expect((await home.run(['start'])).code).to.equal(0);
  });
  afterEach(() => home.cleanup());

  it('memory and processes are bounded for the command as a whole: three processes of 700 MB under 1 GB, 40 sleeping processes under 16', async () => {
    const memory = await exec('for i in 1 2 3; do python3 -c "b = b\'x\' * (700 * 1024 * 1024); import time; time.sleep(3); print(\'held\')" & done; wait; echo done');
    expect(memory.status).to.equal(200);
    expect(memory.body.result.limitsPer).to.equal('sandbox');
    expect(memory.body.result.stdout.match(/held/g)?.length ?? 0, 'at most one process of 700 MB fits in 1 GB').to.be.at.most(1);
    expect(memory.body.result.note).to.match(/more than tools\.exec\.memoryMB \(1024 MB\) together/);

    await home.set('tools.exec.processes', 16);
    const processes = await exec('for i in $(seq 1 40); do sleep 3 & done 2>/dev/null; sleep 0.5; ls /proc | grep -c "^[0-9]"', 20);
    expect(Number(processes.body.result.stdout.trim()), 'processes in the sandbox at once').to.be.at.most(16);
  });

  it('where the workspace is a plain folder, tools.exec.workspaceMB is watched: three writers of 100 MB are stopped, and a command over it can only remove', async () => {
    // The watch is what holds where the daemon cannot give a workspace a file system of its own (workspace-image.test.ts).
    await home.set('tools.exec.workspaceImage', 'off');
    await home.set('tools.exec.workspaceMB', 100);
    const writers = await exec('for i in 1 2 3; do head -c 100M /dev/zero > f$i & done; wait; echo finished');
    expect(writers.body.result.stdout).to.not.include('finished');
    expect(writers.body.result.note).to.match(/workspace holds more than tools\.exec\.workspaceMB \(100 MB\)/);
    const used = usedMB(workspace());
    console.log(`      ${used.toFixed(1)} MB in the workspace when the writers were stopped`);
    expect(used, 'what the writers left').to.be.below(200);
    // Over the bound: nothing grows, but files can be removed.
    const over = await exec('head -c 1M /dev/zero > more; echo wrote=$?', 20);
    expect(over.body.result.stdout + (over.body.result.note ?? '')).to.not.include('wrote=0');
    const freed = await exec('rm -f f1 f2 f3 more; echo freed');
    expect(freed.body.result.stdout).to.equal('freed\n');
    expect((await exec('head -c 10M /dev/zero > ok; echo wrote=$?')).body.result.stdout).to.equal('wrote=0\n');
  });

  it('the sandbox cannot make namespaces, mount, trace or load a filter, and its process 1 names no host path or secret', async () => {
    const probes = await exec([
      'unshare -Urm true 2>/dev/null; echo unshare=$?',
      'unshare -r true 2>/dev/null; echo unshare-user=$?',
      'python3 -c "import ctypes, os; l = ctypes.CDLL(None, use_errno=True); print(\'ptrace\', l.ptrace(0, 0, 0, 0), ctypes.get_errno()); print(\'bpf\', l.syscall(321, 0, 0, 0), ctypes.get_errno()); print(\'keyctl\', l.syscall(250, 0, 0, 0), ctypes.get_errno()); print(\'mount\', l.mount(b\'none\', b\'/tmp\', b\'tmpfs\', 0, None), ctypes.get_errno())"',
      'cat /proc/1/cmdline /proc/1/environ /proc/self/environ 2>/dev/null | tr "\\0" " "',
    ].join('; '));
    const out = probes.body.result.stdout as string;
    expect(out).to.include('unshare=1').and.to.include('unshare-user=1');
    for (const call of ['ptrace', 'bpf', 'keyctl', 'mount']) expect(out, call).to.match(new RegExp(`${call} -1 1\\n`));
    expect(out, 'no host path in the sandbox\'s processes').to.not.include(home.file('config.json').split('/profiles/')[0]!);
    expect(out).to.not.include(TOKEN).and.to.not.include('GATEWAY_');
  });

  it('gateway doctor says where the limits hold: per sandbox in a control group here', async () => {
    const doctor = await home.run(['doctor', '--json']);
    const sandbox = doctor.json.checks.find((check: any) => check.name === 'sandbox');
    expect(sandbox, doctor.stdout).to.include({ status: 'ok' });
    expect(sandbox.detail).to.match(/memory and processes bounded together \(cgroup v[12]/);
  });

  it('concurrent commands are bounded per agent and caller: past tools.exec.concurrency, 429 with Retry-After', async () => {
    await home.set('tools.exec.concurrency', 2);
    const running = [exec('sleep 3; echo one'), exec('sleep 3; echo two')];
    await new Promise((resolve) => setTimeout(resolve, 800));
    const third = await exec('echo three');
    expect(third.status).to.equal(429);
    expect(third.headers.get('retry-after')).to.match(/^\d+$/);
    expect(third.body.message).to.match(/tools\.exec\.concurrency/);
    expect((await Promise.all(running)).map((answer) => answer.body.result.stdout)).to.deep.equal(['one\n', 'two\n']);
    expect((await exec('echo four')).body.result.stdout).to.equal('four\n');
  });
});
