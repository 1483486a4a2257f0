/**
 * Webhook deliveries stored in PostgreSQL (fsync and synchronous commit on)
 * beside SQLite, in one run: deliveries acknowledged per second, their p99,
 * and what /healthz answers in meanwhile (probed 100 times a second), for
 * SQLite (beside the gateway before its store was asynchronous, built from
 * BENCH_SQLITE_BASELINE, alternating rounds), PostgreSQL on this host, and
 * PostgreSQL behind a proxy that adds a round trip of 1 ms and of 5 ms (as
 * one a network hop away: test/support/latency-proxy.ts, in a process of its
 * own), then 1, 2 and 3 daemons on one PostgreSQL at +1 ms, and how fast
 * those daemons drain a job backlog. The load comes from processes of its own.
 */
import { type ChildProcess, execFile, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { TestPostgres } from '../test/support/postgres.ts';
import { freePort, type LoadResult, loadFrom, median, ms, readyLine, sleep, step, type Figure } from './support.ts';
import { WEBHOOK_BENCH_SECRET } from './webhooks.ts';

const run = promisify(execFile);
const ROOT = new URL('..', import.meta.url).pathname;
const BIN = join(ROOT, 'bin/run.js');
const CONNECTIONS = 32;
/** The last commit before the store was asynchronous: SQLite's figure must stay where it was. */
const SQLITE_BASELINE = process.env.BENCH_SQLITE_BASELINE ?? '17c5ad6';

interface Daemon {
  bin: string;
  port: number;
  env: NodeJS.ProcessEnv;
  home: string;
}

/** Starts a daemon without blocking this process (a proxy of its own process keeps moving meanwhile). */
async function startDaemon(bin: string, url: string | undefined): Promise<Daemon> {
  const port = await freePort();
  const home = mkdtempSync(join(tmpdir(), 'gateway-bench-pg-'));
  const env = {
    ...process.env, GATEWAY_HOME: home, CI: 'true', GATEWAY_PORT: String(port), GATEWAY_WEBHOOK_SECRET: WEBHOOK_BENCH_SECRET,
    GATEWAY_TOKEN: 'bench-token-shared-by-every-daemon', ...(url ? { GATEWAY_STORE_URL: url } : {}),
  } as NodeJS.ProcessEnv;
  // The request budget (1200 a minute per address) would answer most of the probes with 429.
  await run(process.execPath, [bin, 'config', 'set', 'gateway.rateLimit.max', '10000000'], { env });
  await run(process.execPath, [bin, 'start'], { env });
  return { bin, port, env, home };
}

async function stopDaemon(daemon: Daemon): Promise<void> {
  await run(process.execPath, [daemon.bin, 'stop', '--force'], { env: daemon.env }).catch(() => undefined);
  rmSync(daemon.home, { recursive: true, force: true });
}

interface Round extends Omit<LoadResult, 'generator'> {
  healthz: { p50: number; p99: number };
}

/** Probes /healthz 100 times a second until stopped; its latencies. */
function probe(port: number): { stop: () => Promise<number[]> } {
  const latencies: number[] = [];
  let going = true;
  const loop = (async () => {
    while (going) {
      const started = performance.now();
      await fetch(`http://127.0.0.1:${port}/healthz`).then((response) => response.arrayBuffer());
      latencies.push(performance.now() - started);
      await sleep(10);
    }
  })();
  return { stop: async () => { going = false; await loop; return latencies; } };
}

const quantile = (values: number[], q: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
};

/**
 * CONNECTIONS senders on each daemon (several daemons serve more senders:
 * what another daemon buys is room for more load), after 2 s that warm them;
 * /healthz of the first probed throughout.
 */
async function load(daemons: Daemon[], duration: number): Promise<Round> {
  await Promise.all(daemons.map((daemon) => loadFrom({ url: `http://127.0.0.1:${daemon.port}/webhooks`, connections: CONNECTIONS, duration: 2, deliveries: true, payload: '2-8k' })));
  const probes = probe(daemons[0]!.port);
  const results = await Promise.all(daemons.map((daemon) => loadFrom({
    url: `http://127.0.0.1:${daemon.port}/webhooks`, connections: CONNECTIONS, duration, deliveries: true, payload: '2-8k',
  })));
  const latencies = await probes.stop();
  return {
    rps: results.reduce((sum, result) => sum + result.rps, 0),
    p99: Math.max(...results.map((result) => result.p99)),
    non2xx: results.reduce((sum, result) => sum + result.non2xx, 0),
    total: results.reduce((sum, result) => sum + result.total, 0),
    healthz: { p50: quantile(latencies, 0.5), p99: quantile(latencies, 0.99) },
  };
}

const describe = (round: Round) => `${round.rps.toFixed(0)} req/s (p99 ${ms(round.p99)} ms${round.non2xx ? `, ${round.non2xx} non-2xx` : ''})`;
const healthz = (round: Round) => `p50 ${round.healthz.p50.toFixed(1)} / p99 ${round.healthz.p99.toFixed(1)} ms`;

/** The median round of several, by deliveries a second. */
const medianRound = (rounds: Round[]): Round => {
  const rate = median(rounds.map((round) => round.rps));
  return rounds.reduce((best, round) => (Math.abs(round.rps - rate) < Math.abs(best.rps - rate) ? round : best));
};

/** The gateway as it was at a commit, built in a worktree of its own beside this checkout (its node_modules shared); undefined when it cannot be. */
function buildBaseline(rev: string): { bin: string; remove: () => void } | undefined {
  const dir = mkdtempSync(join(tmpdir(), 'gateway-bench-baseline-'));
  const remove = () => {
    spawnSync('git', ['-C', ROOT, 'worktree', 'remove', '--force', dir]);
    rmSync(dir, { recursive: true, force: true });
  };
  const added = spawnSync('git', ['-C', ROOT, 'worktree', 'add', '--detach', dir, rev], { encoding: 'utf8' });
  if (added.status !== 0) {
    step(`no SQLite baseline: git worktree add ${rev} failed (${added.stderr.trim()})`);
    remove();
    return undefined;
  }
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  const built = spawnSync('npm', ['run', 'build'], { cwd: dir, encoding: 'utf8' });
  if (built.status !== 0 || !existsSync(join(dir, 'bin/run.js'))) {
    step(`no SQLite baseline: the build of ${rev} failed`);
    remove();
    return undefined;
  }
  return { bin: join(dir, 'bin/run.js'), remove };
}

/** A latency proxy in a process of its own, in front of PostgreSQL. */
async function startProxy(pg: TestPostgres, delayMs: number): Promise<{ port: number; child: ChildProcess }> {
  const child = spawn(process.execPath, [join(ROOT, 'test/support/latency-proxy.ts'), '127.0.0.1', String(pg.port), String(delayMs)], { stdio: ['ignore', 'pipe', 'inherit'] });
  const [, port] = await readyLine(child, /^(\d+)\n/, 'the latency proxy');
  return { port: Number(port), child };
}

/** What a round trip to PostgreSQL takes through a port, median of 200 (the proxy's timers are whole milliseconds). */
async function roundTrip(port: number, database: string): Promise<number> {
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: `postgres://gateway_test@127.0.0.1:${port}/${database}` });
  await client.connect();
  const times: number[] = [];
  for (let n = 0; n < 200; n++) {
    const started = performance.now();
    await client.query('SELECT 1');
    times.push(performance.now() - started);
  }
  await client.end();
  return median(times);
}

const BACKLOG = 20_000;

/**
 * Jobs claimed and finished per second by the daemons together: a backlog of
 * BACKLOG cheap jobs (github.ping, answered by the catch-all handler) is
 * queued at once in the database, and the daemons drain it.
 */
async function drain(pg: TestPostgres, database: string): Promise<{ perSecond: number; jobs: number }> {
  const left = () => Number(pg.sql("SELECT count(*) FROM jobs WHERE status IN ('queued', 'running')", database));
  while (left() > 0) await sleep(100);
  const now = Date.now();
  pg.sql(`INSERT INTO job_payloads (job_id, payload) SELECT 'job_bench' || g, '{"event":"ping","deliveryId":"b","hookId":null,"body":{}}' FROM generate_series(1, ${BACKLOG}) AS g;
    INSERT INTO jobs (id, kind, status, attempts, max_attempts, run_at, created_at) SELECT 'job_bench' || g, 'github.ping', 'queued', 0, 1, ${now}, ${now} FROM generate_series(1, ${BACKLOG}) AS g;
    NOTIFY gateway_events, '{"from":"bench","event":"jobs.changed","payload":{},"scope":"operator.read"}'`, database);
  const started = performance.now();
  let remaining = left();
  while (remaining > 0 && performance.now() - started < 120_000) {
    await sleep(100);
    remaining = left();
  }
  const seconds = (performance.now() - started) / 1000;
  return { perSecond: (BACKLOG - remaining) / seconds, jobs: BACKLOG - remaining };
}

export async function runPostgresBench(duration: number, rounds: number): Promise<Figure[]> {
  const figures: Figure[] = [];
  const pg = await TestPostgres.start(await freePort(), { fsync: true });
  const proxies: ChildProcess[] = [];
  const baseline = buildBaseline(SQLITE_BASELINE);
  let databases = 0;
  const database = () => {
    const name = `bench_${process.pid}_${++databases}`;
    pg.sql(`CREATE DATABASE ${name}`);
    return name;
  };
  /** One round of load on `count` daemons on a store (a PostgreSQL database behind a port, or SQLite). */
  const measure = async (bin: string, count: number, port?: number): Promise<Round & { database?: string }> => {
    const name = port === undefined ? undefined : database();
    const daemons: Daemon[] = [];
    try {
      for (let n = 0; n < count; n++) daemons.push(await startDaemon(bin, name && `postgres://gateway_test@127.0.0.1:${port}/${name}`));
      return { ...(await load(daemons, duration)), database: name };
    } finally {
      await Promise.all(daemons.map(stopDaemon));
    }
  };
  try {
    step(`SQLite, beside the gateway at ${SQLITE_BASELINE}, ${Math.max(2, rounds)} alternating rounds of ${duration} s`);
    const sqliteRounds: Round[] = [];
    const beforeRounds: Round[] = [];
    for (let n = 0; n < Math.max(2, rounds); n++) {
      if (baseline) beforeRounds.push(await measure(baseline.bin, 1));
      sqliteRounds.push(await measure(BIN, 1));
    }
    const sqlite = medianRound(sqliteRounds);
    const before = beforeRounds.length > 0 ? medianRound(beforeRounds) : undefined;
    figures.push({
      name: `POST /webhooks on SQLite, ${CONNECTIONS} conns (median of ${sqliteRounds.length})`, value: describe(sqlite),
      baseline: before ? `${describe(before)} at ${SQLITE_BASELINE}` : 'no baseline build',
      comparison: before ? `${(sqlite.rps / before.rps).toFixed(2)}x` : '-', target: '>= 0.95x', ok: !before || sqlite.rps >= 0.95 * before.rps,
    });
    figures.push({
      name: '/healthz during the SQLite load', value: healthz(sqlite), baseline: before ? `${healthz(before)} at ${SQLITE_BASELINE}` : '-',
      comparison: before ? `p99 ${(sqlite.healthz.p99 / before.healthz.p99).toFixed(2)}x` : '-', target: 'reference', ok: true,
    });

    const probeDb = database();
    const measured: Record<number, { port: number; rtt: number }> = {};
    const direct = await roundTrip(pg.port, probeDb);
    for (const delay of [1, 5]) {
      const proxy = await startProxy(pg, delay);
      proxies.push(proxy.child);
      measured[delay] = { port: proxy.port, rtt: await roundTrip(proxy.port, probeDb) };
    }
    step(`PostgreSQL on this host (round trip ${direct.toFixed(2)} ms), +1 ms (${measured[1]!.rtt.toFixed(2)} ms) and +5 ms (${measured[5]!.rtt.toFixed(2)} ms)`);
    const same = await measure(BIN, 1, pg.port);
    figures.push({
      name: `POST /webhooks on PostgreSQL, same host (round trip ${direct.toFixed(2)} ms)`, value: describe(same), baseline: `${describe(sqlite)} SQLite`,
      comparison: `${(same.rps / sqlite.rps).toFixed(2)}x SQLite`, target: '>= 0.4x SQLite', ok: same.rps >= 0.4 * sqlite.rps && same.non2xx === 0,
    });
    const healthzRow = (what: string, round: Round) => figures.push({
      name: `/healthz during the load, ${what}`, value: healthz(round), baseline: `${healthz(sqlite)} SQLite`,
      comparison: `p99 ${(round.healthz.p99 / sqlite.healthz.p99).toFixed(2)}x`, target: 'p99 <= 2x SQLite\'s', ok: round.healthz.p99 <= 2 * sqlite.healthz.p99,
    });
    healthzRow('PostgreSQL same host', same);
    for (const delay of [1, 5]) {
      const round = await measure(BIN, 1, measured[delay]!.port);
      figures.push({
        name: `POST /webhooks on PostgreSQL +${delay} ms (round trip ${measured[delay]!.rtt.toFixed(2)} ms)`, value: describe(round), baseline: `${describe(same)} same host`,
        comparison: `${(round.rps / same.rps).toFixed(2)}x same host`, target: delay === 1 ? '>= 0.8x same host' : 'no 2xx lost',
        ok: round.non2xx === 0 && (delay !== 1 || round.rps >= 0.8 * same.rps),
      });
      healthzRow(`PostgreSQL +${delay} ms`, round);
    }

    step('1, 2 and 3 daemons on one PostgreSQL at +1 ms, and the job backlog they drain');
    const rates: number[] = [];
    const claims: number[] = [];
    for (const count of [1, 2, 3]) {
      const name = database();
      const daemons: Daemon[] = [];
      try {
        for (let n = 0; n < count; n++) daemons.push(await startDaemon(BIN, `postgres://gateway_test@127.0.0.1:${measured[1]!.port}/${name}`));
        const round = await load(daemons, duration);
        rates.push(round.rps);
        const stored = Number(pg.sql('SELECT count(*) FROM webhook_deliveries', name));
        const drained = await drain(pg, name);
        claims.push(drained.perSecond);
        figures.push({
          name: `POST /webhooks, ${count} daemon${count > 1 ? 's' : ''} on one PostgreSQL +1 ms, ${CONNECTIONS} conns each`,
          value: `${describe(round)}; ${stored} stored`, baseline: count === 1 ? `${describe(same)} same host` : `${rates[0]!.toFixed(0)} req/s, 1 daemon`,
          comparison: count === 1 ? `${(round.rps / same.rps).toFixed(2)}x same host` : `${(round.rps / rates[0]!).toFixed(2)}x 1 daemon`,
          target: count === 1 ? 'no 2xx lost' : 'more daemons, more deliveries/s', ok: round.non2xx === 0 && (count === 1 || round.rps > rates[count - 2]!),
        });
        figures.push({
          name: `jobs claimed and finished from a backlog of ${BACKLOG}, ${count} daemon${count > 1 ? 's' : ''} at +1 ms`,
          value: `${drained.perSecond.toFixed(0)} jobs/s`, baseline: count === 1 ? '-' : `${claims[0]!.toFixed(0)} jobs/s, 1 daemon`,
          comparison: count === 1 ? '-' : `${(drained.perSecond / claims[0]!).toFixed(2)}x`,
          target: 'every job finished once', ok: drained.jobs === BACKLOG && Number(pg.sql("SELECT count(*) FROM jobs WHERE id LIKE 'job_bench%' AND (status <> 'succeeded' OR attempts <> 1)", name)) === 0,
        });
      } finally {
        await Promise.all(daemons.map(stopDaemon));
      }
    }
  } finally {
    for (const proxy of proxies) proxy.kill();
    baseline?.remove();
    pg.destroy();
  }
  return figures;
}
