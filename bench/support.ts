import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

export const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
};

/** Wall time of a command run to completion, in ms. */
export function timeCommand(command: string, args: string[], env: NodeJS.ProcessEnv = process.env): number {
  const started = performance.now();
  const result = spawnSync(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const elapsed = performance.now() - started;
  if (result.status !== 0 && result.status !== 3) throw new Error(`${command} ${args.join(' ')} failed: ${result.stderr}`);
  return elapsed;
}

export function rssKiB(pid: number): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match ? Number(match[1]) : NaN;
}

export { freePort } from '../test/support/cli.ts';

/** A bare node:http server answering the same probe body: the baseline. */
export const BARE_SERVER = `
const http = require('node:http');
const body = Buffer.from(JSON.stringify({ ok: true, status: 'live' }));
http.createServer((req, res) => {
  res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': body.length, 'cache-control': 'no-store' });
  res.end(body);
}).listen(Number(process.argv[1]), '127.0.0.1', () => process.stdout.write('listening\\n'));
`;

/**
 * A server process in a session of its own, as `gateway start` runs the
 * daemon (detached). On Linux each session is scheduled as a group of its own
 * (autogroup): a server in the load generator's session answers its requests
 * sooner than one in another. On a busy 2-core host (load average 7-8), in
 * the same alternating rounds, a detached daemon answered GET /healthz at
 * 0.84x a bare server of the load's session and the same daemon run in that
 * session at 1.17x; in a second run, a detached bare server at 1.01x of the
 * other and the detached daemon at 0.96x.
 */
export const OWN_SESSION = { detached: true } as const;

/** Starts the bare server; resolves with its pid and launch-to-listening time. */
export function startBare(port: number): Promise<{ pid: number; ms: number; stop: () => void }> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(process.execPath, ['-e', BARE_SERVER, String(port)], { stdio: ['ignore', 'pipe', 'inherit'], ...OWN_SESSION });
    child.stdout.once('data', () => resolve({ pid: child.pid!, ms: performance.now() - started, stop: () => child.kill('SIGKILL') }));
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`the bare server exited with ${code}`)));
  });
}

/** The first match of a pattern in what a child prints as it starts (its ready line); rejects when it exits first. */
export function readyLine(child: ChildProcess, pattern: RegExp, what: string): Promise<RegExpExecArray> {
  return new Promise((resolve, reject) => {
    let out = '';
    const onData = (chunk: Buffer) => {
      out += chunk;
      const match = pattern.exec(out);
      if (match) {
        // The stream keeps flowing without the listener: what the child prints later is dropped, never left to fill the pipe.
        child.stdout!.off('data', onData);
        resolve(match);
      }
    };
    child.stdout!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`${what} exited (${code}) before it was ready: ${out.slice(-500)}`)));
  });
}

/** Progress on stderr, so a long run shows where it is. */
export const step = (text: string): void => {
  process.stderr.write(`bench: ${text}\n`);
};

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export interface Figure {
  name: string;
  value: string;
  baseline: string;
  comparison: string;
  target: string;
  ok: boolean;
}

export function printFigures(figures: Figure[]): void {
  const rows = [['figure', 'gateway', 'baseline', 'comparison', 'target', ''], ...figures.map((f) => [f.name, f.value, f.baseline, f.comparison, f.target, f.ok ? 'ok' : 'MISSED'])];
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
  for (const row of rows) console.log(row.map((cell, column) => cell.padEnd(widths[column]!)).join('  ').trimEnd());
}

export interface LoadResult {
  rps: number;
  /** When the server's pid was given: the CPU it spent (user and system, every thread) per request answered, in µs. */
  cpuUs?: number;
  /** ms: whole from autocannon, to the hundredth from wrk. */
  p99: number;
  non2xx: number;
  total: number;
  /** What made the load: wrk, or autocannon. */
  generator: string;
}

/** A latency in ms as the report shows it. */
export const ms = (value: number): string => (Number.isInteger(value) ? String(value) : value.toFixed(1));

/** CPU time a process has spent, user and system, in ms (from /proc; Linux counts it in ticks of 10 ms). */
export function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name, which may hold spaces: utime and stime are the 12th and 13th of them.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/**
 * Load from a process of its own (bench/load-process.ts): GET a URL, or POST
 * signed deliveries to it. Given the server's pid, the result holds its CPU
 * per request too: a cost a busy machine moves much less than a rate.
 */
export async function loadFrom(options: { url: string; connections: number; duration: number; deliveries?: boolean; payload?: '1k' | '2-8k' | 'small' }, serverPid?: number): Promise<LoadResult> {
  const before = serverPid === undefined ? 0 : cpuMs(serverPid);
  const result = await generateLoad(options);
  return serverPid === undefined ? result : { ...result, cpuUs: ((cpuMs(serverPid) - before) * 1000) / Math.max(1, result.total) };
}

function generateLoad(options: Parameters<typeof loadFrom>[0]): Promise<LoadResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [new URL('./load-process.ts', import.meta.url).pathname, JSON.stringify(options)], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout!.on('data', (chunk) => { out += chunk; });
    child.on('close', (code) => {
      try {
        resolve(JSON.parse(out) as LoadResult);
      } catch {
        reject(new Error(`the load process exited ${code} without a result`));
      }
    });
  });
}

/** The CPU per request of one server against another's, over alternating rounds: the ratio of their medians, and theirs in µs. */
export function cpuComparison(runs: LoadResult[], baseline: LoadResult[]): string {
  const mine = median(runs.map((run) => run.cpuUs ?? NaN));
  const theirs = median(baseline.map((run) => run.cpuUs ?? NaN));
  return `CPU per request ${(mine / theirs).toFixed(2)}x (${mine.toFixed(0)} µs against ${theirs.toFixed(0)})`;
}

/** The machine's load average over the last minute, for the report: a busy machine explains a figure. */
export const machineLoad = (): string => readFileSync('/proc/loadavg', 'utf8').split(' ')[0]!;
