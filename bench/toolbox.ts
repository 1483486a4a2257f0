/**
 * The built-in tools' costs, in one run: `exec` of `true` through the
 * sandbox (prlimit, bubblewrap's namespaces and mounts, the limits) beside a
 * bare `child_process.spawn` of `true`, alternating, reported as the
 * milliseconds the sandbox adds; and memory.search's full-text query over
 * 100,000 stored messages of an agent's 1,000 conversations (SQLite FTS5).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runSandboxed, sandboxTools } from '../src/server/toolbox/sandbox.ts';
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

export async function runToolboxBench(rounds = 40): Promise<Figure[]> {
  const tools = sandboxTools();
  if ('missing' in tools) return [{ name: 'exec of true through the sandbox', value: 'not measured', baseline: tools.missing, comparison: '-', target: 'reported', ok: false }];
  const workspace = mkdtempSync(join(tmpdir(), 'gateway-bench-exec-'));
  const limits = { timeoutMs: 10_000, cpuSeconds: 10, memoryBytes: 1024 ** 3, processes: 64, fileBytes: 100 * 1024 ** 2, tmpBytes: 64 * 1024 ** 2, outputBytes: 65_536, network: false };
  const plain: number[] = [];
  const sandboxed: number[] = [];
  try {
    // Warm both paths once.
    await bare();
    await runSandboxed('true', workspace, limits);
    for (let round = 0; round < rounds; round++) {
      plain.push(await bare());
      const started = performance.now();
      const result = await runSandboxed('true', workspace, limits);
      if (result.exitCode !== 0) throw new Error(`true exited ${result.exitCode}: ${result.stderr}`);
      sandboxed.push(performance.now() - started);
    }
  } finally {
    rmSync(workspace, { recursive: true, force: true });
  }
  return [{
    name: 'exec of true through the sandbox', value: `p50 ${ms(median(sandboxed))} ms, p95 ${ms(percentile(sandboxed, 95))} ms`,
    baseline: `p50 ${ms(median(plain))} ms, p95 ${ms(percentile(plain, 95))} ms bare spawn`, comparison: `+${ms(median(sandboxed) - median(plain))} ms`, target: 'reported', ok: true,
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
