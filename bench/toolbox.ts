/**
 * The built-in tools' costs, in one run: `exec` of `true` through the
 * sandbox (prlimit, bubblewrap's namespaces and mounts, the limits) beside a
 * bare `child_process.spawn` of `true`, alternating, reported as the
 * milliseconds the sandbox adds.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runSandboxed, sandboxTools } from '../src/server/toolbox/sandbox.ts';
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
