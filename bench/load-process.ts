/**
 * The load generator in a process of its own, so the process that measures
 * does not share its thread with the load: `node bench/load-process.ts
 * '{"url":...,"connections":50,"duration":10,"deliveries":false,"payload":"2-8k"}'`
 * prints one JSON line: {rps, p99, non2xx, total, generator}.
 *
 * wrk (Debian's package) when it is installed, else autocannon;
 * BENCH_LOAD=autocannon chooses autocannon. The generator shares the
 * machine's cores with what it measures: at 8,000 deliveries a second on
 * 2 cores, autocannon takes about 0.46 of a core and wrk 0.26, and every
 * server measured beside it gets what the generator leaves.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PAYLOADS, pushBodies, signedDeliveries, smallBodies } from './webhooks.ts';

type Options = { url: string; connections: number; duration: number; deliveries?: boolean; payload?: keyof typeof PAYLOADS | 'small' };
const options = JSON.parse(process.argv[2] ?? '{}') as Options;
const bodies = () => (options.payload === 'small' ? smallBodies(200) : pushBodies(200, PAYLOADS[options.payload ?? '2-8k']));

const loadGenerator = (): 'wrk' | 'autocannon' =>
  process.env.BENCH_LOAD !== 'autocannon' && !spawnSync('wrk', ['--version']).error ? 'wrk' : 'autocannon';

async function withAutocannon(): Promise<Record<string, number>> {
  const { default: autocannon } = await import('autocannon');
  const result = await autocannon({
    url: options.url,
    connections: options.connections,
    duration: options.duration,
    ...(options.deliveries ? { requests: signedDeliveries(bodies()) } : {}),
  });
  return { rps: result.requests.average, p99: result.latency.p99, non2xx: result.non2xx, total: result.requests.total };
}

function withWrk(): Record<string, number> {
  const dir = mkdtempSync(join(tmpdir(), 'gateway-bench-load-'));
  try {
    const file = join(dir, 'bodies.tsv');
    if (options.deliveries) writeFileSync(file, bodies().map(({ body, signature }) => `${signature}\t${body}\n`).join(''));
    // One thread: the load's share of the cores stays small, and 50 connections are few for one epoll loop.
    const run = spawnSync('wrk', [
      '-t1', `-c${options.connections}`, `-d${options.duration}s`, '--timeout', '10s',
      '-s', new URL('./wrk-load.lua', import.meta.url).pathname, options.url, ...(options.deliveries ? ['--', file] : []),
    ], { encoding: 'utf8' });
    const line = run.stdout.split('\n').reverse().find((text) => text.startsWith('{'));
    if (run.status !== 0 || !line) throw new Error(`wrk failed (${run.status}): ${run.stderr || run.stdout}`);
    const result = JSON.parse(line) as { rps: number; p99: number; non2xx: number; errors: number; total: number };
    // A connection error or timeout is a request that got no answer: counted with the answers that were not 2xx.
    return { rps: result.rps, p99: result.p99, non2xx: result.non2xx + result.errors, total: result.total };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const generator = loadGenerator();
const result = generator === 'wrk' ? withWrk() : await withAutocannon();
process.stdout.write(`${JSON.stringify({ ...result, generator })}\n`);
