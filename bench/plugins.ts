import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import autocannon from 'autocannon';
import type { Figure } from './support.ts';

export const BENCH_ROUTES = 500;

/** A plugin with 500 prefix routes (the slowest kind to look up) and a trivial tool, written into the profile's folder. */
export function writeBenchPlugin(profileDir: string): string {
  const folder = join(profileDir, 'bench-plugin');
  mkdirSync(folder, { recursive: true });
  writeFileSync(join(folder, 'index.js'), `
export function register(api) {
  for (let i = 0; i < ${BENCH_ROUTES}; i++) {
    api.http.route({ method: 'GET', path: '/bench/p' + i + '/', match: 'prefix', auth: 'plugin', handler: (ctx) => { ctx.body = { route: i }; } });
  }
  api.tools.add({ name: 'bench.noop', description: 'does nothing', inputSchema: { type: 'object', properties: { n: { type: 'integer' } } }, handler: (args) => ({ n: args.n ?? 0 }) });
}
`);
  return folder;
}

const ratioFigure = (name: string, run: autocannon.Result, probes: autocannon.Result, target: number): Figure => {
  const ok = run.non2xx === 0 && run.errors === 0;
  const ratio = run.requests.average / probes.requests.average;
  return {
    name,
    value: `${run.requests.average.toFixed(0)} req/s (p99 ${run.latency.p99} ms${ok ? '' : `, ${run.non2xx} non-2xx`})`,
    baseline: `${probes.requests.average.toFixed(0)} req/s GET /healthz, same daemon`,
    comparison: `${ratio.toFixed(2)}x`,
    target: `>= ${target}x`,
    ok: ok && ratio >= target,
  };
};

/** A plugin route found among 500 (the one looked at last), and POST /tools/invoke of a trivial tool, beside GET /healthz. */
export async function runPluginBench(port: number, token: string, duration: number): Promise<Figure[]> {
  const base = `http://127.0.0.1:${port}`;
  // fetch may first try a pooled connection to the daemon the restart replaced: retry once on a fresh one.
  const probe = () => fetch(`${base}/bench/p0/x`).catch((error: Error) => ({ status: `${error.message} (${String((error.cause as Error | undefined)?.message)})` }));
  let warm = await probe();
  if (warm.status !== 200) warm = await probe();
  if (warm.status !== 200) throw new Error(`the bench plugin is not serving: ${warm.status}`);
  const probes = await autocannon({ url: `${base}/healthz`, connections: 50, duration });
  const lookup = await autocannon({ url: `${base}/bench/p0/x`, connections: 50, duration });
  const tools = await autocannon({
    url: `${base}/tools/invoke`, connections: 50, duration, method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ tool: 'bench.noop', args: { n: 1 } }),
  });
  return [
    ratioFigure(`GET a plugin route among ${BENCH_ROUTES}, 50 conns`, lookup, probes, 0.3),
    ratioFigure('POST /tools/invoke (trivial tool), 50 conns', tools, probes, 0.2),
  ];
}
