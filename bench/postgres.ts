/**
 * Several daemons on one PostgreSQL (fsync and synchronous commit on): signed
 * deliveries acknowledged per second and their p99 with 1, 2 and 3 daemons,
 * beside one daemon on its SQLite file in the same run (the load from
 * processes of their own), and how fast the daemons together drain a job
 * backlog.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TestPostgres } from '../test/support/postgres.ts';
import { freePort, loadFrom, ms, sleep, type Figure } from './support.ts';
import { WEBHOOK_BENCH_SECRET } from './webhooks.ts';

const BIN = new URL('../bin/run.js', import.meta.url).pathname;
const CONNECTIONS = 48;

interface Daemon {
  port: number;
  env: NodeJS.ProcessEnv;
  home: string;
}

function startDaemon(url: string | undefined): Promise<Daemon> {
  return freePort().then((port) => {
    const home = mkdtempSync(join(tmpdir(), 'gateway-bench-pg-'));
    const env = {
      ...process.env, GATEWAY_HOME: home, CI: 'true', GATEWAY_PORT: String(port), GATEWAY_WEBHOOK_SECRET: WEBHOOK_BENCH_SECRET,
      GATEWAY_TOKEN: 'bench-token-shared-by-every-daemon', ...(url ? { GATEWAY_STORE_URL: url } : {}),
    } as NodeJS.ProcessEnv;
    const started = spawnSync(process.execPath, [BIN, 'start'], { env, encoding: 'utf8' });
    if (started.status !== 0) throw new Error(`gateway start failed: ${started.stderr}`);
    return { port, env, home };
  });
}

function stopDaemon(daemon: Daemon): void {
  spawnSync(process.execPath, [BIN, 'stop', '--force'], { env: daemon.env });
  rmSync(daemon.home, { recursive: true, force: true });
}

/** The load spread evenly over the daemons (CONNECTIONS in all), each share from a process of its own; the sum of their rates and the worst p99. */
async function load(daemons: Daemon[], duration: number): Promise<{ rps: number; p99: number; non2xx: number; total: number }> {
  const results = await Promise.all(daemons.map((daemon) => loadFrom({
    url: `http://127.0.0.1:${daemon.port}/webhooks`, connections: Math.max(1, Math.round(CONNECTIONS / daemons.length)), duration, deliveries: true,
  })));
  return {
    rps: results.reduce((sum, result) => sum + result.rps, 0),
    p99: Math.max(...results.map((result) => result.p99)),
    non2xx: results.reduce((sum, result) => sum + result.non2xx, 0),
    total: results.reduce((sum, result) => sum + result.total, 0),
  };
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

export async function runPostgresBench(duration: number): Promise<Figure[]> {
  const figures: Figure[] = [];
  const pg = await TestPostgres.start(await freePort(), { fsync: true });
  try {
    const sqlite = await startDaemon(undefined);
    let baseline: Awaited<ReturnType<typeof load>>;
    try {
      baseline = await load([sqlite], duration);
    } finally {
      stopDaemon(sqlite);
    }
    const rates: number[] = [];
    const claims: number[] = [];
    for (const count of [1, 2, 3]) {
      const database = `bench_${count}_${process.pid}`;
      pg.sql(`CREATE DATABASE ${database}`);
      const url = pg.url(database);
      const daemons: Daemon[] = [];
      try {
        for (let n = 0; n < count; n++) daemons.push(await startDaemon(url));
        const result = await load(daemons, duration);
        rates.push(result.rps);
        const stored = Number(pg.sql("SELECT count(*) FROM webhook_deliveries", database));
        const drained = await drain(pg, database);
        claims.push(drained.perSecond);
        const grows = count === 1 || result.rps > rates[0]!;
        figures.push({
          name: `POST /webhooks, ${count} daemon${count > 1 ? 's' : ''} on one PostgreSQL, ${CONNECTIONS} conns`,
          value: `${result.rps.toFixed(0)} req/s (p99 ${ms(result.p99)} ms${result.non2xx ? `, ${result.non2xx} non-2xx` : ''}; ${stored} stored)`,
          baseline: `${baseline.rps.toFixed(0)} req/s (p99 ${ms(baseline.p99)} ms), 1 daemon on SQLite`,
          comparison: `${(result.rps / baseline.rps).toFixed(2)}x SQLite${count > 1 ? `, ${(result.rps / rates[0]!).toFixed(2)}x 1 daemon` : ''}`,
          target: count === 1 ? 'no 2xx lost' : 'grows with daemons',
          ok: result.non2xx === 0 && grows,
        });
        figures.push({
          name: `jobs claimed and finished from a backlog of ${BACKLOG}, ${count} daemon${count > 1 ? 's' : ''}`,
          value: `${drained.perSecond.toFixed(0)} jobs/s`,
          baseline: count === 1 ? '-' : `${claims[0]!.toFixed(0)} jobs/s, 1 daemon`,
          comparison: count === 1 ? '-' : `${(drained.perSecond / claims[0]!).toFixed(2)}x`,
          target: 'every job finished once', ok: drained.jobs === BACKLOG && Number(pg.sql("SELECT count(*) FROM jobs WHERE id LIKE 'job_bench%' AND (status <> 'succeeded' OR attempts <> 1)", database)) === 0,
        });
      } finally {
        daemons.forEach(stopDaemon);
      }
    }
  } finally {
    pg.destroy();
  }
  return figures;
}
