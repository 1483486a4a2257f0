/**
 * The built-in tools' costs, in one run: `exec` of `true` through the
 * sandbox (prlimit, bubblewrap's namespaces and mounts, the limits, the
 * control group and the system-call filter) beside a bare
 * `child_process.spawn` of `true` and beside the same sandbox without the
 * group, the filter and the workspace watch (what exec was before its
 * containment held under concurrency), alternating; files.read and
 * files.write of a 4 KB file through the held-descriptor walk beside the
 * check-then-open-by-name they replaced; and memory.search's full-text
 * query over 100,000 stored messages of an agent's 1,000 conversations
 * (SQLite FTS5).
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { mkdir, open, realpath, rename, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { runSandboxed, sandboxArgs, sandboxTools } from '../src/server/sandbox/sandbox.ts';
import { Workspace } from '../src/server/toolbox/workspace.ts';
import { Store } from '../src/server/store/database.ts';
import { SESSION_MIGRATIONS } from '../src/server/sessions/migrations.ts';
import { SessionStore } from '../src/server/sessions/session-store.ts';
import { median, ms, type Figure } from './support.ts';

const bare = () => new Promise<number>((resolve, reject) => {
  const started = performance.now();
  const child = spawn('true', { stdio: 'ignore' });
  child.on('error', reject);
  child.on('close', () => resolve(performance.now() - started));
});

const percentile = (values: number[], p: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor((p / 100) * values.length))]!;

/** The sandbox as it was before its containment held under concurrency: prlimit and bubblewrap, no control group, filter or watch. */
function uncontained(workspace: string, limits: Parameters<typeof runSandboxed>[2]): Promise<number> {
  const tools = sandboxTools();
  if ('missing' in tools) throw new Error(tools.missing);
  const root = process.getuid?.() === 0;
  const inner = root ? [tools.setpriv!, '--reuid=65534', '--regid=65534', '--clear-groups', '--inh-caps=-all', '--bounding-set=-all', '--no-new-privs', '--', '/bin/sh', '-c', 'true'] : ['/bin/sh', '-c', 'true'];
  const args = [`--cpu=${limits.cpuSeconds}`, `--as=${limits.memoryBytes}`, `--nproc=${limits.processes + 1000}`, `--fsize=${limits.fileBytes}`, '--core=0', '--', tools.bwrap,
    ...(root ? [] : ['--unshare-user', '--uid', String(process.getuid!()), '--gid', String(process.getgid!())]), ...sandboxArgs(workspace, limits, { user: 'nobody', home: '/workspace' }), '--', ...inner];
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(tools.prlimit, args, { stdio: ['ignore', 'pipe', 'pipe', 'pipe', 'pipe'], detached: true });
    const [, , , passwd, group] = child.stdio as unknown as NodeJS.WritableStream[];
    passwd!.end('nobody:x:65534:65534:nobody:/workspace:/bin/sh\n');
    group!.end('nobody:x:65534:\n');
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(performance.now() - started) : reject(new Error(`true exited ${code}`))));
  });
}

/** files.read and files.write as they were: the path resolved and checked, then opened again by name. */
const checkedRead = async (root: string, path: string) => {
  const real = await realpath(join(root, path));
  if (!real.startsWith(root)) throw new Error('outside');
  const info = await stat(real);
  const handle = await open(real, 'r');
  try {
    const buffer = Buffer.alloc(info.size);
    await handle.read(buffer, 0, info.size, 0);
    return buffer.toString('utf8');
  } finally {
    await handle.close();
  }
};
const checkedWrite = async (root: string, path: string, content: string) => {
  const target = join(root, path);
  await mkdir(dirname(target), { recursive: true });
  if (!(await realpath(dirname(target))).startsWith(root)) throw new Error('outside');
  const temporary = join(dirname(target), `.${randomBytes(6).toString('hex')}.tmp`);
  const handle = await open(temporary, 'wx', 0o600);
  try {
    await handle.writeFile(content, 'utf8');
    await handle.sync();
  } finally {
    await handle.close();
  }
  await rename(temporary, target);
};

export async function runToolboxBench(rounds = 40): Promise<Figure[]> {
  const figures: Figure[] = [];
  const folder = mkdtempSync(join(tmpdir(), 'gateway-bench-files-'));
  try {
    // files.* of a 4 KB file two folders down, the contained walk and the check-then-open alternating.
    const root = await realpath(folder);
    const workspace = new Workspace(root);
    const content = 'x'.repeat(4096);
    await workspace.write('notes/2026/file.txt', content);
    const samples = { read: [] as number[], readBefore: [] as number[], write: [] as number[], writeBefore: [] as number[] };
    for (let round = 0; round < rounds * 10; round++) {
      let started = performance.now();
      await workspace.read('notes/2026/file.txt');
      samples.read.push(performance.now() - started);
      started = performance.now();
      await checkedRead(root, 'notes/2026/file.txt');
      samples.readBefore.push(performance.now() - started);
      started = performance.now();
      await workspace.write('notes/2026/file.txt', content);
      samples.write.push(performance.now() - started);
      started = performance.now();
      await checkedWrite(root, 'notes/2026/file.txt', content);
      samples.writeBefore.push(performance.now() - started);
    }
    for (const [name, after, before] of [['files.read of a 4 KB file', samples.read, samples.readBefore], ['files.write of a 4 KB file (fsync)', samples.write, samples.writeBefore]] as const) {
      const added = median(after) - median(before);
      figures.push({
        name, value: `p50 ${ms(median(after))} ms, p95 ${ms(percentile(after, 95))} ms`, baseline: `p50 ${ms(median(before))} ms checked, then opened by name`,
        comparison: `${added >= 0 ? '+' : ''}${ms(added)} ms`, target: '<= +1 ms', ok: added <= 1,
      });
    }
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
  const tools = sandboxTools();
  if ('missing' in tools) return [...figures, { name: 'exec of true through the sandbox', value: 'not measured', baseline: tools.missing, comparison: '-', target: 'reported', ok: false }];
  const workspace = mkdtempSync(join(tmpdir(), 'gateway-bench-exec-'));
  const limits = { timeoutMs: 10_000, cpuSeconds: 10, memoryBytes: 1024 ** 3, processes: 64, fileBytes: 100 * 1024 ** 2, tmpBytes: 64 * 1024 ** 2, outputBytes: 65_536, network: false, workspaceBytes: 1024 ** 3 };
  const plain: number[] = [];
  const before: number[] = [];
  const sandboxed: number[] = [];
  let limitsPer = '';
  try {
    // Warm every path once.
    await bare();
    await uncontained(workspace, limits);
    await runSandboxed('true', workspace, limits);
    for (let round = 0; round < rounds; round++) {
      plain.push(await bare());
      before.push(await uncontained(workspace, limits));
      const started = performance.now();
      const result = await runSandboxed('true', workspace, limits);
      if (result.exitCode !== 0) throw new Error(`true exited ${result.exitCode}: ${result.stderr}`);
      sandboxed.push(performance.now() - started);
      limitsPer = result.limitsPer;
    }
  } finally {
    rmSync(workspace, { recursive: true, force: true });
  }
  const added = median(sandboxed) - median(before);
  return [...figures, {
    name: 'exec of true through the sandbox', value: `p50 ${ms(median(sandboxed))} ms, p95 ${ms(percentile(sandboxed, 95))} ms (limits per ${limitsPer})`,
    baseline: `p50 ${ms(median(plain))} ms bare spawn, p50 ${ms(median(before))} ms without group, filter and watch`, comparison: `+${ms(added)} ms for the containment`, target: '<= +5 ms', ok: added <= 5,
  }];
}

/** A vocabulary of 3,000 words: a word is in about 0.4 % of the messages, as a search term of a real conversation is. */
const WORDS = Array.from({ length: 3000 }, (_, i) => `w${i.toString(36)}x${(i * 7919 % 1000).toString(36)}`);

/** memory.search over 100,000 messages: p50 and p99 of the store's full-text query, one and two words. */
export async function runMemoryBench(messages = 100_000, queries = 300): Promise<Figure[]> {
  const folder = mkdtempSync(join(tmpdir(), 'gateway-bench-memory-'));
  const store = await Store.open({ path: join(folder, 'state.db'), synchronous: 'normal' });
  try {
    await store.migrate([{ module: 'sessions', migrations: SESSION_MIGRATIONS }]);
    const sessions = new SessionStore(store);
    let seed = 42;
    const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    const sentence = () => Array.from({ length: 12 }, () => WORDS[Math.floor(random() * WORDS.length)]).join(' ');
    for (let batch = 0; batch < messages / 1000; batch++) {
      await store.transaction(async (tx) => {
        for (let n = 0; n < 1000; n++) {
          const i = batch * 1000 + n;
          const address = { channel: 'bench', account: 'default', kind: 'direct' as const, peer: `peer${i % 1000}` };
          await sessions.record({ ...address, direction: i % 2 ? 'out' : 'in', sender: i % 2 ? 'bench' : `peer${i % 1000}`, text: sentence(), at: Date.now(), ...(i % 2 ? { via: 'agent:bench' } : {}) }, tx);
        }
      });
    }
    const one: number[] = [];
    const two: number[] = [];
    for (let q = 0; q < queries; q++) {
      const first = WORDS[(q * 37) % WORDS.length]!;
      const second = WORDS[(q * 101 + 3) % WORDS.length]!;
      let started = performance.now();
      // An agent whose memory its people share (memory.scope agent): the widest search, over every conversation.
      await sessions.search(first, { via: 'agent:bench' }, 10);
      one.push(performance.now() - started);
      started = performance.now();
      await sessions.search(`${first} ${second}`, { via: 'agent:bench' }, 10);
      two.push(performance.now() - started);
    }
    return [{
      name: `memory.search over ${messages.toLocaleString('en')} messages (SQLite FTS5)`, value: `one word p50 ${ms(median(one))} ms, p99 ${ms(percentile(one, 99))} ms`,
      baseline: `two words p50 ${ms(median(two))} ms, p99 ${ms(percentile(two, 99))} ms`, comparison: '-', target: 'reported', ok: true,
    }];
  } finally {
    await store.close();
    rmSync(folder, { recursive: true, force: true });
  }
}
