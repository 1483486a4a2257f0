/**
 * The HTTP pipeline beside a bare node:http server doing the same, in one run:
 * GET /healthz, and POST of a small signed JSON body (about 60 bytes) to a
 * webhook route whose signature the pipeline checks, answered before the
 * application and as an application route. Each server in a process of its own
 * (bench/pipeline-server.ts), the load from another; rounds alternate between
 * the two and the figure is the median of the rounds' ratios.
 */
import { spawn } from 'node:child_process';
import { cpuComparison, freePort, type Figure, type LoadResult, loadFrom, machineLoad, median, ms, OWN_SESSION, readyLine } from './support.ts';

const SERVER = new URL('./pipeline-server.ts', import.meta.url).pathname;

async function startServer(kind: 'gateway' | 'bare'): Promise<{ url: string; pid: number; stop: () => void }> {
  const port = await freePort();
  // Each in a session of its own, as the daemon and the bare server of the other figures run (support.ts).
  const child = spawn(process.execPath, [SERVER, String(port), kind], { stdio: ['ignore', 'pipe', 'inherit'], ...OWN_SESSION });
  await readyLine(child, /listening/, `the ${kind} pipeline server`);
  return { url: `http://127.0.0.1:${port}`, pid: child.pid!, stop: () => child.kill('SIGKILL') };
}

interface Load { path: string; deliveries: boolean }

type Server = Awaited<ReturnType<typeof startServer>>;

/** Alternating rounds of the same load on both servers, after 2 s of it on each. */
async function compare(gateway: Server, bare: Server, load: Load, rounds: number, seconds: number) {
  const run = (server: Server, duration: number) => loadFrom({ url: `${server.url}${load.path}`, connections: 50, duration, ...(load.deliveries ? { deliveries: true, payload: 'small' as const } : {}) }, server.pid);
  await run(bare, 2);
  await run(gateway, 2);
  const bareRuns: LoadResult[] = [];
  const gatewayRuns: LoadResult[] = [];
  for (let round = 0; round < rounds; round++) {
    bareRuns.push(await run(bare, seconds));
    gatewayRuns.push(await run(gateway, seconds));
  }
  return { bareRuns, gatewayRuns, ratio: median(gatewayRuns.map((result, round) => result.rps / bareRuns[round]!.rps)) };
}

export async function runPipelineFigures(options: { rounds: number; seconds: number }): Promise<Figure[]> {
  const gateway = await startServer('gateway');
  const bare = await startServer('bare');
  const figures: Figure[] = [];
  try {
    const cases: { name: string; load: Load; target: number }[] = [
      { name: 'GET /healthz through the pipeline alone (no daemon around it)', load: { path: '/healthz', deliveries: false }, target: 0.95 },
      { name: 'POST a webhook route, small signed JSON, answered before the application', load: { path: '/early/webhook', deliveries: true }, target: 0.95 },
      { name: 'POST a webhook route, small signed JSON, as an application route (Koa)', load: { path: '/app/webhook', deliveries: true }, target: 0 },
    ];
    for (const { name, load, target } of cases) {
      const before = machineLoad();
      const { bareRuns, gatewayRuns, ratio } = await compare(gateway, bare, load, options.rounds, options.seconds);
      const refused = [...bareRuns, ...gatewayRuns].reduce((sum, run) => sum + run.non2xx, 0);
      figures.push({
        name: `${name}, 50 conns, median of ${options.rounds} alternating rounds`,
        value: `${median(gatewayRuns.map((run) => run.rps)).toFixed(0)} req/s (p99 ${ms(median(gatewayRuns.map((run) => run.p99)))} ms${refused ? `, ${refused} non-2xx` : ''})`,
        baseline: `${median(bareRuns.map((run) => run.rps)).toFixed(0)} req/s bare node:http doing the same (p99 ${ms(median(bareRuns.map((run) => run.p99)))} ms); load ${before}, ${bareRuns[0]!.generator}`,
        comparison: `${ratio.toFixed(2)}x (rounds: ${gatewayRuns.map((run, round) => (run.rps / bareRuns[round]!.rps).toFixed(2)).join(' ')}); ${cpuComparison(gatewayRuns, bareRuns)}`,
        target: target ? `>= ${target}x` : '(reported)', ok: refused === 0 && ratio >= target,
      });
    }
  } finally {
    gateway.stop();
    bare.stop();
  }
  return figures;
}
