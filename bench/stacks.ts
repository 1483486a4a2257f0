// Webhook deliveries through the gateway beside the stack users build from common parts (Fastify,
// @octokit/webhooks-methods and BullMQ on Redis with its append-only file synced every second), in
// the same run: the same signed deliveries at 1 KB and at 2-8 KB, rounds alternating, the load from a
// process of its own, both sides' job backlogs run before every round.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, type LoadResult, loadFrom, machineLoad, median, ms, readyLine, sleep, type Figure } from './support.ts';
import { type BenchProfile, drained, WEBHOOK_BENCH_SECRET } from './webhooks.ts';

const STACK = new URL('./stacks/', import.meta.url).pathname;

/** Installs the comparison stack's packages (bench/stacks, npm ci) the first time they are needed. */
function installStack(): void {
  if (existsSync(join(STACK, 'node_modules/bullmq/package.json'))) return;
  process.stderr.write('bench: installing the comparison stack (bench/stacks, npm ci)\n');
  const installed = spawnSync('npm', ['ci', '--no-audit', '--no-fund'], { cwd: STACK, stdio: ['ignore', 'ignore', 'inherit'] });
  if (installed.status !== 0) throw new Error('npm ci in bench/stacks failed');
}

/** Jobs a BullMQ queue still holds waiting or running, read with redis-cli. */
function bullmqLeft(redisPort: number): number {
  let left = 0;
  for (const list of ['wait', 'active']) {
    const out = spawnSync('redis-cli', ['-p', String(redisPort), 'LLEN', `bull:github:${list}`], { encoding: 'utf8' });
    left += Number(out.stdout.trim()) || 0;
  }
  return left;
}

export async function runStackFigures(profile: BenchProfile, options: { rounds: number; duration: number }): Promise<Figure[]> {
  if (spawnSync('redis-server', ['--version']).error) {
    return [{
      name: 'deliveries beside Fastify + BullMQ on Redis', value: 'not measured', baseline: 'redis-server is not installed',
      comparison: '-', target: 'apt-get install redis-server, then run again', ok: false,
    }];
  }
  installStack();
  const redisDir = mkdtempSync(join(tmpdir(), 'gateway-bench-redis-'));
  const redisPort = await freePort();
  const redis = spawn('redis-server', [
    '--port', String(redisPort), '--bind', '127.0.0.1', '--dir', redisDir, '--save', '',
    // No rewrite of the append-only file in the background: it would fall on whichever side is measured at the time.
    '--appendonly', 'yes', '--appendfsync', 'everysec', '--auto-aof-rewrite-percentage', '0', '--daemonize', 'no',
  ], { stdio: ['ignore', 'pipe', 'inherit'] });
  let stack: ChildProcess | undefined;
  try {
    await readyLine(redis, /Ready to accept connections/, 'redis-server');
    stack = spawn(process.execPath, [join(STACK, 'bullmq-server.ts'), String(redisPort), WEBHOOK_BENCH_SECRET], { stdio: ['ignore', 'pipe', 'inherit'] });
    const stackPort = Number((await readyLine(stack, /^(\d+)\n/, 'the BullMQ server'))[1]);
    const load = machineLoad();
    const sides = {
      gateway: { url: `http://127.0.0.1:${profile.port}/webhooks`, drain: () => drained(profile) },
      bullmq: {
        url: `http://127.0.0.1:${stackPort}/webhooks`,
        drain: async () => {
          const deadline = Date.now() + 60_000;
          while (bullmqLeft(redisPort) > 0 && Date.now() < deadline) await sleep(250);
        },
      },
    } as const;
    const payloads = ['1k', '2-8k'] as const;
    const runs = new Map<string, LoadResult[]>();
    // Both sides warm (their code compiled, their stores opened) before anything counts.
    for (const side of Object.values(sides)) await loadFrom({ url: side.url, connections: 50, duration: 2, deliveries: true, payload: '1k' });
    for (let round = 0; round < options.rounds; round++) {
      for (const payload of payloads) {
        for (const [name, side] of Object.entries(sides)) {
          // Neither side runs its backlog while the other is measured.
          for (const each of Object.values(sides)) await each.drain();
          const result = await loadFrom({ url: side.url, connections: 50, duration: options.duration, deliveries: true, payload });
          runs.set(`${name} ${payload}`, [...(runs.get(`${name} ${payload}`) ?? []), result]);
        }
      }
    }
    const of = (key: string) => {
      const results = runs.get(key)!;
      return { rps: median(results.map((run) => run.rps)), p99: median(results.map((run) => run.p99)), non2xx: results.reduce((sum, run) => sum + run.non2xx, 0) };
    };
    const shown = (figure: { rps: number; p99: number; non2xx: number }) => `${figure.rps.toFixed(0)}/s, p99 ${ms(figure.p99)} ms${figure.non2xx ? `, ${figure.non2xx} non-2xx` : ''}`;
    const [gateway1k, bullmq1k, gateway8k, bullmq8k] = [of('gateway 1k'), of('bullmq 1k'), of('gateway 2-8k'), of('bullmq 2-8k')];
    return [{
      name: `deliveries at 1 KB (normal), median of ${options.rounds} alternating rounds`,
      value: shown(gateway1k), baseline: `${shown(bullmq1k)} Fastify + BullMQ on Redis; load ${load}, ${runs.get('gateway 1k')![0]!.generator}`,
      comparison: `${(gateway1k.rps / bullmq1k.rps).toFixed(2)}x`,
      target: ">= BullMQ's rate", ok: gateway1k.non2xx === 0 && gateway1k.rps >= bullmq1k.rps,
    }, {
      name: `deliveries at 2-8 KB (normal), median of ${options.rounds} alternating rounds`,
      value: shown(gateway8k), baseline: `${shown(bullmq8k)} Fastify + BullMQ on Redis`,
      comparison: `${(gateway8k.rps / bullmq8k.rps).toFixed(2)}x, p99 ${(gateway8k.p99 / bullmq8k.p99).toFixed(2)}x`,
      target: '>= 12,000/s, p99 <= 15 ms', ok: gateway8k.non2xx === 0 && gateway8k.rps >= 12_000 && gateway8k.p99 <= 15,
    }];
  } finally {
    // The server first, so it never sees Redis go away under it (it would say so, as a failure).
    if (stack && stack.exitCode === null && stack.signalCode === null) {
      const exited = new Promise((resolve) => stack!.once('exit', resolve));
      stack.kill('SIGTERM');
      await Promise.race([exited, sleep(5000)]);
    }
    redis.kill('SIGTERM');
    await sleep(500);
    rmSync(redisDir, { recursive: true, force: true });
  }
}
