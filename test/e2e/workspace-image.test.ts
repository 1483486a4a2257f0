import { expect } from 'chai';
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { imageSupport } from '../../src/shared/workspace-image.ts';
import { freePort, Home } from '../support/cli.ts';

const TOKEN = 'workspace-image-gateway-token-for-tests';
const MB = 1024 * 1024;

/** Why this host cannot give a workspace a file system of its own, or undefined when it can. */
const unsupported = (() => {
  const support = imageSupport();
  return support.available ? undefined : support.reason;
})();

/** The mounts at a path, as the host's mountinfo lists them: the read-only guard beneath, and the image. */
const mountsAt = (path: string) => readFileSync('/proc/self/mountinfo', 'utf8').split('\n').filter((line) => line.split(' ')[4] === path);
/** The image's mounts at a path (a second one would be a workspace mounted twice). */
const imagesAt = (path: string) => mountsAt(path).filter((line) => line.split(' - ')[1]?.startsWith('ext4 '));
/** The guards at a path: one, beneath the image. */
const guardsAt = (path: string) => mountsAt(path).filter((line) => line.split(' - ')[1]?.startsWith('tmpfs gateway-workspace-guard '));
/** The loop devices attached to an image. */
const loopsOf = (image: string) => execFileSync('losetup', ['-j', image], { encoding: 'utf8' }).split('\n').filter(Boolean);
/** Bytes the files of a folder take on disk (du, the host's view). */
const usedBytes = (folder: string) => Number(execFileSync('du', ['-s', '-B1', '-x', folder], { encoding: 'utf8' }).split('\t')[0]);

/**
 * tools.exec.workspaceMB held by construction: the workspace is a loop-mounted
 * file system of its own, so a write past the bound fails at it, whoever
 * writes and however many at once; the mount is the person's folder on the
 * host, outlives kill -9 without a second loop device, grows live, and goes
 * with the profile.
 */
describe('a workspace of its own file system: tools.exec.workspaceMB enforced (e2e, root, loop devices)', function () {
  this.timeout(180_000);
  let home: Home;
  let base: string;
  let port: number;
  const profile = () => realpathSync(join(home.file('config.json'), '..'));
  const workspace = () => join(profile(), 'workspace');
  const image = () => join(profile(), '.workspace.img');
  const invoke = async (tool: string, args: Record<string, unknown>, waitMs = 60_000) => {
    const response = await fetch(`${base}/tools/invoke`, {
      method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify({ tool, args }),
      signal: AbortSignal.timeout(waitMs),
    });
    return { status: response.status, body: await response.json() as any };
  };
  const exec = async (command: string) => {
    const answer = await invoke('exec', { command, timeout: 60 });
    expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
    return answer.body.result as { stdout: string; stderr: string; note?: string; exitCode: number };
  };
  const daemonPid = () => home.lock().pid as number;

  before(function () {
    if (unsupported) this.skip();
  });

  beforeEach(async () => {
    port = await freePort();
    base = `http://127.0.0.1:${port}`;
    home = new Home({ GATEWAY_PORT: String(port), GATEWAY_TOKEN: TOKEN });
    await home.set('gateway.tools.allow', ['exec', 'files.write', 'files.edit']);
    await home.set('tools.exec.approval', 'full');
    await home.set('tools.exec.workspaceMB', 100);
  });
  afterEach(() => {
    const left = home ? (() => {
      try {
        return image();
      } catch {
        return undefined;
      }
    })() : undefined;
    home?.cleanup();
    if (left) expect(loopsOf(left), 'loop devices left after cleanup').to.deep.equal([]);
  });

  it('a command writing 200 MB under a 100 MB bound meets "No space left on device" at the bound; the person sees the files in the folder', async () => {
    // Files already in the folder are moved into the file system the first time.
    mkdirSync(join(home.profileDir(), 'workspace'), { recursive: true });
    writeFileSync(join(home.profileDir(), 'workspace', 'notes.txt'), 'kept\n');
    expect((await home.run(['start'])).code).to.equal(0);
    const wrote = await exec('cat notes.txt; head -c 200M /dev/zero > big; echo rc=$?');
    expect(wrote.stdout).to.match(/^kept\nrc=1\n$/);
    expect(wrote.stderr).to.include('No space left on device');
    expect(wrote.note).to.match(/workspace is full: its file system holds tools\.exec\.workspaceMB \(100 MB\)/);
    const used = usedBytes(workspace());
    console.log(`      ${(used / MB).toFixed(1)} MB in the workspace after a 200 MB write under 100 MB`);
    expect(used).to.be.at.most(100 * MB);
    // The host path is the mount point, its source the image beside it (0600), over a read-only guard, and the person's files are there.
    expect(imagesAt(workspace())).to.have.length(1);
    expect(mountsAt(workspace()).map((line) => line.split(' - ')[1]!.split(' ')[0])).to.deep.equal(['tmpfs', 'ext4']);
    expect(guardsAt(workspace())).to.have.length(1);
    expect(loopsOf(image())).to.have.length(1);
    expect(statSync(image()).mode & 0o777).to.equal(0o600);
    expect(readdirSync(workspace()).sort()).to.deep.equal(['big', 'notes.txt']);
    expect(readFileSync(join(workspace(), 'notes.txt'), 'utf8')).to.equal('kept\n');
    expect(existsSync(join(profile(), '.workspace.moved')), 'the folder moved aside is removed').to.equal(false);
  });

  it('a crash while the files were being moved in loses nothing: a half-made image is dropped, a folder moved aside comes back', async () => {
    // Crashed while the image was being filled: the folder untouched, a fresh image half-made beside it.
    mkdirSync(join(home.profileDir(), 'workspace'), { recursive: true });
    writeFileSync(join(home.profileDir(), 'workspace', 'notes.txt'), 'kept\n');
    writeFileSync(join(home.profileDir(), '.workspace.img.new'), 'half', { mode: 0o600 });
    expect((await home.run(['start'])).code).to.equal(0);
    expect((await exec('cat notes.txt')).stdout).to.equal('kept\n');
    expect(existsSync(join(profile(), '.workspace.img.new'))).to.equal(false);
    expect(imagesAt(workspace())).to.have.length(1);
  });

  it('a folder moved aside by a crash with no image to mount goes back where it was, and is moved in whole', async () => {
    mkdirSync(join(home.profileDir(), '.workspace.moved', 'sub'), { recursive: true });
    writeFileSync(join(home.profileDir(), '.workspace.moved', 'sub', 'notes.txt'), 'kept\n');
    expect((await home.run(['start'])).code).to.equal(0);
    expect((await exec('cat sub/notes.txt')).stdout).to.equal('kept\n');
    expect(existsSync(join(profile(), '.workspace.moved'))).to.equal(false);
    expect(readFileSync(join(workspace(), 'sub', 'notes.txt'), 'utf8')).to.equal('kept\n');
  });

  it('a folder already holding more than the bound stays a plain folder, its size watched, its files untouched', async () => {
    await home.set('tools.exec.workspaceMB', 10);
    mkdirSync(join(home.profileDir(), 'workspace'), { recursive: true });
    writeFileSync(join(home.profileDir(), 'workspace', 'big'), Buffer.alloc(20 * MB, 1));
    expect((await home.run(['start'])).code).to.equal(0);
    const over = await exec('ls; head -c 1M /dev/zero > more; echo rc=$?');
    expect(over.stdout).to.match(/^big\n/).and.to.not.include('rc=0');
    expect(mountsAt(workspace())).to.deep.equal([]);
    expect(existsSync(image())).to.equal(false);
    expect(statSync(join(workspace(), 'big')).size).to.equal(20 * MB);
  });

  it('two commands at once cannot pass the bound together, and files.write past it is answered 507 with what to do', async () => {
    expect((await home.run(['start'])).code).to.equal(0);
    const [one, two] = await Promise.all([exec('head -c 70M /dev/zero > one; echo rc=$?'), exec('head -c 70M /dev/zero > two; echo rc=$?')]);
    expect([one.stdout, two.stdout], 'at least one of the writers met the bound').to.include('rc=1\n');
    expect(usedBytes(workspace())).to.be.at.most(100 * MB);
    const write = await invoke('files.write', { path: 'notes/today.txt', content: 'x'.repeat(200_000) });
    expect(write.status, JSON.stringify(write.body)).to.equal(507);
    expect(write.body.error).to.equal('insufficient_storage');
    expect(write.body.message).to.match(/No room left in the workspace for notes\/today\.txt.*Remove files from the workspace, or raise the bound/);
    // Nothing half-written is left behind, and removing files makes room again.
    expect((await exec('ls -A notes | wc -l; rm -f one two; echo freed')).stdout).to.equal('0\nfreed\n');
    const again = await invoke('files.write', { path: 'notes/today.txt', content: 'x'.repeat(200_000) });
    expect(again.status, JSON.stringify(again.body)).to.equal(200);
  });

  it('the sandbox\'s mountinfo shows the workspace as the root of its own file system, never the host path', async () => {
    expect((await home.run(['start'])).code).to.equal(0);
    const inside = await exec('cat /proc/self/mountinfo');
    const line = inside.stdout.split('\n').find((entry) => entry.split(' ')[4] === '/workspace');
    expect(line, inside.stdout).to.match(/^\d+ \d+ \d+:\d+ \/ \/workspace /);
    expect(inside.stdout).to.not.include(home.dir).and.to.not.include(realpathSync(home.dir));
  });

  it('kill -9 and start again, three times: the mount is reused, never a second one or a second loop device', async () => {
    expect((await home.run(['start'])).code).to.equal(0);
    await exec('echo before > kept.txt');
    for (let round = 0; round < 3; round++) {
      process.kill(daemonPid(), 'SIGKILL');
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(imagesAt(workspace()), 'the mount outlives the daemon').to.have.length(1);
      expect((await home.run(['start'])).code).to.equal(0);
      expect((await exec('cat kept.txt')).stdout).to.equal('before\n');
      expect(imagesAt(workspace())).to.have.length(1);
      expect(loopsOf(image())).to.have.length(1);
    }
    // gateway stop leaves it mounted too: the person's files stay where they look for them.
    expect((await home.run(['stop'])).code).to.equal(0);
    expect(readFileSync(join(workspace(), 'kept.txt'), 'utf8')).to.equal('before\n');
    // As after the host restarted: unmounted, the folder empty; the daemon's start mounts it again before any call.
    execFileSync('umount', [workspace()]);
    execFileSync('umount', [workspace()]);
    expect(mountsAt(workspace())).to.deep.equal([]);
    expect(loopsOf(image())).to.deep.equal([]);
    expect(readdirSync(workspace())).to.deep.equal([]);
    expect((await home.run(['start'])).code).to.equal(0);
    for (let waited = 0; waited < 10_000 && !existsSync(join(workspace(), 'kept.txt')); waited += 100) await new Promise((resolve) => setTimeout(resolve, 100));
    expect(readFileSync(join(workspace(), 'kept.txt'), 'utf8')).to.equal('before\n');
    expect(loopsOf(image())).to.have.length(1);
    // The image alone unmounted by hand: the folder shows the empty read-only guard, and the image is mounted over it again.
    expect((await home.run(['stop'])).code).to.equal(0);
    execFileSync('umount', [workspace()]);
    expect(guardsAt(workspace())).to.have.length(1);
    expect(imagesAt(workspace())).to.deep.equal([]);
    expect(() => writeFileSync(join(workspace(), 'stray.txt'), 'x')).to.throw(/EROFS|read-only/i);
    expect((await home.run(['start'])).code).to.equal(0);
    expect((await exec('cat kept.txt')).stdout).to.equal('before\n');
    expect(guardsAt(workspace())).to.have.length(1);
    expect(imagesAt(workspace())).to.have.length(1);
  });

  it('files are bounded too: empty files past the workspace\'s inodes (one per 16 KiB) fail there, not on the host', async () => {
    expect((await home.run(['start'])).code).to.equal(0);
    const hostInodes = () => Number(execFileSync('df', ['--output=iused', home.dir], { encoding: 'utf8' }).split('\n')[1]);
    const before = hostInodes();
    const made = await exec('i=0; while [ $i -lt 20000 ] && true 2>/dev/null > f$i; do i=$((i+1)); done; echo $i');
    const count = Number(made.stdout.trim());
    expect(count, made.stderr).to.be.within(5000, (100 * MB) / (16 * 1024));
    // The files are on the workspace's file system: its inodes hold them, and the host spent next to none of them
    // (what other tests running beside this one spend is well under half).
    expect(Number(execFileSync('df', ['--output=iused', workspace()], { encoding: 'utf8' }).split('\n')[1]), 'inodes the workspace holds').to.be.at.least(count);
    expect(hostInodes() - before, 'inodes the host spent').to.be.below(count / 2);
  });

  it('raising tools.exec.workspaceMB grows the file system while the daemon runs; lowering it keeps the size and watches the bound', async () => {
    await home.set('tools.exec.workspaceMB', 50);
    expect((await home.run(['start'])).code).to.equal(0);
    expect((await exec('head -c 70M /dev/zero > a; echo rc=$?')).stdout).to.equal('rc=1\n');
    await home.set('tools.exec.workspaceMB', 150);
    // (Two files: one may hold no more than tools.exec.fileMB, 100 MB.)
    const grown = await exec('rm a; head -c 60M /dev/zero > a && head -c 60M /dev/zero > b; echo rc=$?');
    expect(grown.stdout, grown.stderr).to.equal('rc=0\n');
    expect(readdirSync(workspace()).sort()).to.deep.equal(['a', 'b']);
    expect(usedBytes(workspace())).to.be.within(120 * MB, 150 * MB);
    expect(loopsOf(image())).to.have.length(1);
    // Lowered: the file system keeps its size, and the watch stops a command past the new bound.
    await home.set('tools.exec.workspaceMB', 100);
    const over = await exec('head -c 10M /dev/zero > c; echo rc=$?');
    expect(over.stdout + (over.note ?? '')).to.not.include('rc=0');
    const doctor = await home.run(['doctor', '--json']);
    const check = doctor.json.checks.find((entry: any) => entry.name === 'workspace');
    expect(check, doctor.stdout).to.include({ status: 'warn' });
    expect(check.detail).to.match(/file system of 150 MB, more than tools\.exec\.workspaceMB \(100 MB\)/);
  });

  it('gateway doctor says the bound holds by construction; removing the profile unmounts it and frees its loop device', async () => {
    const other = 'quota';
    expect((await home.run(['profiles', 'create', other])).code).to.equal(0);
    await home.run(['config', 'set', 'gateway.tools.allow', '["exec"]', '--profile', other]);
    await home.run(['config', 'set', 'tools.exec.approval', '"full"', '--profile', other]);
    await home.run(['config', 'set', 'tools.exec.workspaceMB', '20', '--profile', other]);
    expect((await home.run(['start', '--profile', other])).code).to.equal(0);
    base = `http://127.0.0.1:${port}`;
    expect((await exec('echo hi > hi.txt; cat hi.txt')).stdout).to.equal('hi\n');
    const folder = join(realpathSync(home.profileDir(other)), 'workspace');
    const otherImage = join(realpathSync(home.profileDir(other)), '.workspace.img');
    expect(imagesAt(folder)).to.have.length(1);
    const doctor = await home.run(['doctor', '--json', '--profile', other]);
    const check = doctor.json.checks.find((entry: any) => entry.name === 'workspace');
    expect(check, doctor.stdout).to.include({ status: 'ok' });
    expect(check.detail).to.match(/tools\.exec\.workspaceMB \(20 MB\) holds by construction for each workspace under the profile: a file system of its own \(1 mounted\)/);
    const removed = await home.run(['profiles', 'remove', other, '--yes']);
    expect(removed.code, removed.stderr).to.equal(0);
    expect(mountsAt(folder)).to.deep.equal([]);
    expect(loopsOf(otherImage)).to.deep.equal([]);
    expect(existsSync(home.profileDir(other))).to.equal(false);
  });

  it('an agent whose workspace is a folder of the operator\'s own: never mounted over, its files in sight; doctor says the bound is watched there, not enforced, why, and how to have it enforced', async () => {
    const mine = join(realpathSync(home.dir), 'operator-files');
    mkdirSync(mine, { mode: 0o755 });
    writeFileSync(join(mine, 'plan.txt'), 'mine\n', { mode: 0o644 });
    await home.set('agents', { own: { workspace: mine } });
    expect((await home.run(['start'])).code).to.equal(0);
    expect((await exec('cat plan.txt')).stdout).to.equal('mine\n');
    expect(mountsAt(mine), 'nothing mounted over the operator\'s folder').to.deep.equal([]);
    expect(existsSync(join(realpathSync(home.dir), '.operator-files.img'))).to.equal(false);
    expect(readdirSync(mine)).to.deep.equal(['plan.txt']);
    const doctor = await home.run(['doctor', '--json']);
    const check = doctor.json.checks.find((entry: any) => entry.name === 'workspace');
    expect(check, doctor.stdout).to.include({ status: 'warn' });
    expect(check.detail).to.include('for agent own, whose workspace is a folder of the operator\'s own (agents.<id>.workspace), it is watched, not enforced: '
      + 'the gateway never mounts a file system over a folder of the operator\'s (it would hide the files in it), and a folder on a shared file system has no bound of its own to set');
    expect(check.fix).to.include(`gateway config unset agents.own.workspace --profile default   # own then works in workspaces/own, a file system of its own`);
  });

  it('with tools.exec.workspaceImage off the workspace stays a plain folder, and doctor says the bound is watched, not enforced', async () => {
    await home.set('tools.exec.workspaceImage', 'off');
    expect((await home.run(['start'])).code).to.equal(0);
    expect((await exec('echo plain > p.txt; cat p.txt')).stdout).to.equal('plain\n');
    expect(mountsAt(workspace())).to.deep.equal([]);
    expect(existsSync(image())).to.equal(false);
    const doctor = await home.run(['doctor', '--json']);
    const check = doctor.json.checks.find((entry: any) => entry.name === 'workspace');
    expect(check, doctor.stdout).to.include({ status: 'warn' });
    expect(check.detail).to.match(/tools\.exec\.workspaceMB \(100 MB\) is watched, not enforced: tools\.exec\.workspaceImage is off/);
  });
});

/**
 * Growing an image offline (where the daemon may not grow a mounted ext4: no
 * CAP_SYS_RESOURCE) unmounts it for a while: the folder then shows the
 * read-only guard beneath the image, never the bare folder under both.
 */
describe('a workspace of its own file system: grown offline, the folder is never bare (e2e, root, loop devices)', function () {
  this.timeout(180_000);
  const NAMES = 200;
  let root: string;
  const folder = () => join(root, 'workspace');
  /** Mounts or grows the image as the daemon does, in a process without CAP_SYS_RESOURCE. */
  const mount = (bytes: number) => JSON.parse(execFileSync('setpriv', [
    '--inh-caps=-sys_resource', '--bounding-set=-sys_resource', process.execPath, fileURLToPath(new URL('../fixtures/workspace/grow.ts', import.meta.url)), folder(), String(bytes),
  ], { encoding: 'utf8' })) as { by: string; bytes?: number };
  const types = () => readFileSync('/proc/self/mountinfo', 'utf8').split('\n').filter((line) => line.split(' ')[4] === folder()).map((line) => line.split(' - ')[1]!.split(' ').slice(0, 2).join(' '));

  before(function () {
    if (unsupported) this.skip();
  });
  beforeEach(() => {
    root = realpathSync(mkdtempSync(join(tmpdir(), 'workspace-grow-')));
  });
  afterEach(() => {
    for (let left = types().length; left > 0; left--) execFileSync('umount', ['-l', folder()]);
    rmSync(root, { recursive: true, force: true });
  });

  it('a writer looping in the workspace while it is grown offline leaves nothing in the bare folder, and loses nothing it wrote', async () => {
    expect(mount(20 * MB)).to.include({ by: 'filesystem', bytes: 20 * MB });
    const stack = types();
    expect(stack, 'the guard beneath, the image on top').to.have.length(2);
    expect(stack[0]).to.equal('tmpfs gateway-workspace-guard');
    expect(stack[1]).to.match(/^ext4 \/dev\/loop\d+$/);
    // As root, whom no folder's mode stops: each write that succeeds is counted, each refused one tried again. It writes over
    // 200 names in turn (w<i mod 200>), so the workspace's inodes last whatever the host's speed.
    const stop = join(root, 'stop');
    const writer = spawn('sh', ['-c', `cd /; i=0; f=0; while [ ! -e ${stop} ]; do if echo $i 2>/dev/null > ${folder()}/w$((i % ${NAMES})); then i=$((i+1)); else f=$((f+1)); fi; done; echo $i $f`], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    writer.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk;
    });
    const ended = new Promise((resolve) => writer.on('close', resolve));
    try {
      for (let waited = 0; waited < 10_000 && !existsSync(join(folder(), `w${NAMES - 1}`)); waited += 20) await new Promise((resolve) => setTimeout(resolve, 20));
      // umount refuses while the writer has a file open: tried again until it is grown.
      let grown = 0;
      for (let attempt = 0; attempt < 50 && grown < 40 * MB; attempt++) grown = mount(40 * MB).bytes ?? 0;
      expect(grown, 'grown offline').to.equal(40 * MB);
      await new Promise((resolve) => setTimeout(resolve, 200));
    } finally {
      writeFileSync(stop, '');
      await ended;
    }
    const [written, refused] = out.trim().split(' ').map(Number) as [number, number];
    console.log(`      ${written} files written, ${refused} writes refused while the image was unmounted`);
    expect(refused, 'the writer wrote while the image was unmounted').to.be.above(0);
    // Every write that succeeded is in the workspace: each name holds the last number written to it.
    expect(written, 'the writer went round its names').to.be.above(NAMES);
    const lost = Array.from({ length: NAMES }, (_, index) => index).filter((index) => {
      const last = written - 1 - ((written - 1 - index) % NAMES);
      return readFileSync(join(folder(), `w${index}`), 'utf8') !== `${last}\n`;
    });
    expect(lost, 'names whose last write is lost').to.deep.equal([]);
    expect(readdirSync(folder())).to.have.length(NAMES);
    // The image and the guard off: the bare folder holds nothing.
    execFileSync('umount', [folder()]);
    expect(types()).to.deep.equal(['tmpfs gateway-workspace-guard']);
    expect(readdirSync(folder()), 'the guard holds nothing').to.deep.equal([]);
    execFileSync('umount', [folder()]);
    expect(types()).to.deep.equal([]);
    expect(readdirSync(folder()), 'the bare folder holds nothing').to.deep.equal([]);
  });

  it('a workspace whose every inode is used still grows offline, and its files take the new room', async () => {
    expect(mount(20 * MB)).to.include({ by: 'filesystem', bytes: 20 * MB });
    execFileSync('sh', ['-c', `cd ${folder()} && i=0; while true 2>/dev/null > f$i; do i=$((i+1)); done`]);
    expect(() => writeFileSync(join(folder(), 'one-more'), '')).to.throw(/ENOSPC/);
    expect(mount(40 * MB)).to.include({ by: 'filesystem', bytes: 40 * MB });
    writeFileSync(join(folder(), 'f0'), Buffer.alloc(25 * MB));
    expect(statSync(join(folder(), 'f0')).size).to.equal(25 * MB);
  });
});

/** The figure the issue asks for: what the mount costs an exec of `true` (the watch it replaces included). */
describe('a workspace of its own file system: what it costs an exec (e2e)', function () {
  this.timeout(300_000);
  it('exec of true, on its own file system and in a plain folder, calls alternated in the same run', async function () {
    if (unsupported) this.skip();
    const rounds = 40;
    const daemon = async (imageSetting: 'auto' | 'off') => {
      const port = await freePort();
      const home = new Home({ GATEWAY_PORT: String(port), GATEWAY_TOKEN: TOKEN });
      await home.set('gateway.tools.allow', ['exec']);
      await home.set('tools.exec.approval', 'full');
      await home.set('tools.exec.workspaceImage', imageSetting);
      expect((await home.run(['start'])).code).to.equal(0);
      const call = async () => {
        const started = performance.now();
        const answer = await fetch(`http://127.0.0.1:${port}/tools/invoke`, {
          method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify({ tool: 'exec', args: { command: 'true' } }),
        }).then((response) => response.json()) as any;
        expect(answer.result?.exitCode, JSON.stringify(answer)).to.equal(0);
        return performance.now() - started;
      };
      return { home, call };
    };
    const mounted = await daemon('auto');
    const plain = await daemon('off');
    try {
      // The first call in a workspace makes and mounts its image (1 GB, the default bound).
      const first = { mounted: await mounted.call(), plain: await plain.call() };
      console.log(`      first exec in a workspace: ${first.mounted.toFixed(0)} ms making and mounting its image, ${first.plain.toFixed(0)} ms in a plain folder`);
      for (let i = 0; i < 3; i++) await Promise.all([mounted.call(), plain.call()]);
      const times = { mounted: [] as number[], plain: [] as number[] };
      for (let i = 0; i < rounds; i++) {
        times.mounted.push(await mounted.call());
        times.plain.push(await plain.call());
      }
      const median = (list: number[]) => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)]!;
      console.log(`      exec of true, median of ${rounds} alternated: ${median(times.mounted).toFixed(1)} ms on its own file system, ${median(times.plain).toFixed(1)} ms in a plain folder (watched)`);
      // The file system replaces the watch's du and statfs on every command: no dearer than the watch, within this host's noise.
      expect(median(times.mounted)).to.be.below(median(times.plain) * 1.5);
    } finally {
      mounted.home.cleanup();
      plain.home.cleanup();
    }
  });
});
