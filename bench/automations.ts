/**
 * Automations, in one run:
 *
 * - 10,000 automations defined (cron expressions in four time zones, hourly
 *   intervals, one-shots a year away): the daemon's start, launch to ready,
 *   and until every automation is scheduled (`automations list` answers a
 *   next firing for each), and its resident memory once idle, beside a daemon
 *   with none (alternating rounds);
 * - firing lateness (the firing's run starting, minus its scheduled time),
 *   p50 and p99, with 1,000 firings a minute due (1,000 automations, each at
 *   its own second of the minute, each running an agent on a model that
 *   answers at once).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { ScriptedUpstream } from '../test/support/scripted-upstream.ts';
import { freePort, median, ms, rssKiB, sleep, step, timeCommand, type Figure } from './support.ts';

const BIN = new URL('../bin/run.js', import.meta.url).pathname;
const ZONES = ['Europe/Berlin', 'America/New_York', 'Asia/Tokyo', 'UTC'];

function many(count: number): Record<string, unknown> {
  const automations: Record<string, unknown> = {};
  for (let i = 0; i < count; i++) {
    const trigger = i % 3 === 0 ? { cron: `${i % 60} ${i % 24} * * *`, tz: ZONES[i % ZONES.length] }
      : i % 3 === 1 ? { every: `${(i % 50) + 1}h` } : { at: new Date(Date.now() + 365 * 86_400_000 + i * 1000).toISOString() };
    automations[`a${i}`] = { trigger, action: { agent: 'helper', prompt: `Automation ${i} at {{scheduledFor}}` } };
  }
  return automations;
}

/** A home with the model and agent every daemon here uses, and these automations written into its config.json. */
function prepare(upstream: string, automations: Record<string, unknown>) {
  const home = mkdtempSync(join(tmpdir(), 'gateway-bench-automations-'));
  const env = { ...process.env, GATEWAY_HOME: home, GATEWAY_PORT: '0', CI: 'true' } as NodeJS.ProcessEnv;
  const gateway = (...args: string[]) => {
    const result = spawnSync(process.execPath, [BIN, ...args], { env, encoding: 'utf8' });
    if (result.status !== 0) throw new Error(`gateway ${args.join(' ')}: ${result.stderr}`);
    return result.stdout;
  };
  return {
    home, env, gateway,
    async write(): Promise<void> {
      env.GATEWAY_PORT = String(await freePort());
      gateway('config', 'set', 'models.providers.script', JSON.stringify({ kind: 'openai-compatible', baseUrl: upstream, models: ['m'], retries: { max: 0 } }));
      gateway('config', 'set', 'agents.helper', JSON.stringify({ model: 'script/m', history: 0 }));
      const file = join(home, 'profiles/default/config.json');
      writeFileSync(file, JSON.stringify({ ...JSON.parse(readFileSync(file, 'utf8')), automations }, null, 2));
    },
    pid: () => JSON.parse(readFileSync(join(home, 'profiles/default/daemon.json'), 'utf8')).pid as number,
    cleanup: () => {
      spawnSync(process.execPath, [BIN, 'stop'], { env });
      rmSync(home, { recursive: true, force: true });
    },
  };
}

const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
};

export async function runAutomationBench(rounds: number): Promise<Figure[]> {
  const figures: Figure[] = [];
  const upstream = await new ScriptedUpstream().start();
  try {
    step('automations: 10,000 defined, start and memory beside none');
    const none = prepare(upstream.url, {});
    const tenThousand = prepare(upstream.url, many(10_000));
    await none.write();
    await tenThousand.write();
    const starts = { none: [] as number[], many: [] as number[] };
    const scheduled: number[] = [];
    const rss = { none: [] as number[], many: [] as number[] };
    try {
      for (let round = 0; round < rounds; round++) {
        for (const [name, daemon] of [['none', none], ['many', tenThousand]] as const) {
          const began = Date.now();
          starts[name].push(timeCommand(process.execPath, [BIN, 'start'], daemon.env));
          if (name === 'many') {
            // Scheduled: every automation has its next firing.
            // The clock takes them in order: the last one scheduled, all are.
            for (;;) {
              if (JSON.parse(daemon.gateway('automations', 'show', 'a9999', '--json')).nextAt) break;
              await sleep(50);
            }
            scheduled.push(Date.now() - began);
          }
          await sleep(5000);
          rss[name].push(rssKiB(daemon.pid()));
          daemon.gateway('stop');
        }
      }
    } finally {
      none.cleanup();
      tenThousand.cleanup();
    }
    const startNone = median(starts.none);
    const startMany = median(starts.many);
    figures.push({
      name: 'start with 10,000 automations, launch to ready', value: `${ms(startMany)} ms`, baseline: `${ms(startNone)} ms with none`,
      comparison: `+${ms(startMany - startNone)} ms; all scheduled ${ms(median(scheduled))} ms after launch`, target: 'reported', ok: true,
    });
    const rssNone = median(rss.none) / 1024;
    const rssMany = median(rss.many) / 1024;
    figures.push({ name: 'idle RSS with 10,000 automations', value: `${rssMany.toFixed(1)} MB`, baseline: `${rssNone.toFixed(1)} MB with none`, comparison: `+${(rssMany - rssNone).toFixed(1)} MB`, target: 'reported', ok: true });

    step('automations: lateness with 1,000 firings a minute due');
    const minutes = Number(process.env.BENCH_AUTOMATION_MINUTES ?? 2);
    const perSecond: Record<string, unknown> = {};
    for (let i = 0; i < 1000; i++) perSecond[`s${i}`] = { trigger: { cron: `${i % 60} * * * * *` }, action: { agent: 'helper', prompt: 'tick' } };
    const busy = prepare(upstream.url, perSecond);
    await busy.write();
    try {
      busy.gateway('start');
      const since = Date.now() + 5000;
      await sleep(5000 + minutes * 60_000);
      busy.gateway('stop');
      const db = new DatabaseSync(join(busy.home, 'profiles/default/state.db'), { readOnly: true });
      const rows = db.prepare('SELECT scheduled_for, fired_at FROM automation_firings WHERE scheduled_for >= ? AND scheduled_for < ?').all(since, since + minutes * 60_000) as { scheduled_for: number; fired_at: number | null }[];
      db.close();
      const fired = rows.filter((row) => row.fired_at !== null).map((row) => Number(row.fired_at) - Number(row.scheduled_for));
      figures.push({
        name: 'firing lateness, 1,000 firings a minute due (fired minus scheduled)', value: `p50 ${ms(percentile(fired, 50))} ms, p99 ${ms(percentile(fired, 99))} ms`,
        baseline: `${fired.length} of ${rows.length} firings due in ${minutes} min ran (${(fired.length / minutes).toFixed(0)} a minute)`,
        comparison: '-', target: 'reported', ok: fired.length === rows.length && rows.length >= minutes * 990,
      });
    } finally {
      busy.cleanup();
    }
  } finally {
    await upstream.stop();
  }
  return figures;
}
