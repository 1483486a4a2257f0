import { createHmac, randomUUID } from 'node:crypto';
import { DatabaseSync } from 'node:sqlite';
import { join } from 'node:path';
import { type LoadResult, loadFrom, machineLoad, median, ms, rssKiB, sleep, type Figure } from './support.ts';

const SECRET = 'bench-webhook-secret';

/** Realistic push bodies, 2-8 KB by default (spread evenly), each with its signature (the signature covers the body only). */
export function pushBodies(count: number, size: { from: number; to: number } = { from: 2048, to: 8192 }): { body: string; signature: string }[] {
  return Array.from({ length: count }, (_, index) => {
    const target = size.from + (((size.to - size.from) * index) / count);
    const commit = (n: number) => ({ id: randomUUID().replace(/-/g, ''), message: `change ${n}: ${'lorem ipsum '.repeat(8)}`, author: { name: 'dev', email: 'dev@example.com' }, added: [], removed: [], modified: ['src/a.ts'] });
    const commits: ReturnType<typeof commit>[] = [];
    const bodyOf = () => JSON.stringify({ ref: 'refs/heads/main', before: '0'.repeat(40), after: 'b'.repeat(40), repository: { id: 1, full_name: 'acme/widgets' }, head_commit: commits[0], commits });
    commits.push(commit(0));
    let body = bodyOf();
    while (body.length < target) {
      commits.push(commit(commits.length));
      body = bodyOf();
      if (body.length > target) {
        commits.pop();
        body = bodyOf();
        break;
      }
    }
    // The last commit's message makes up the rest (the first commit appears twice, as head_commit too).
    const gap = target - body.length;
    if (gap > 0) {
      commits.at(-1)!.message += ' '.repeat(Math.floor(gap / (commits.length === 1 ? 2 : 1)));
      body = bodyOf();
    }
    return { body, signature: `sha256=${createHmac('sha256', SECRET).update(body).digest('hex')}` };
  });
}

/** Small JSON bodies (about 60 bytes), each with its signature: what a chat platform's webhook posts, without the store behind it. */
export function smallBodies(count: number): { body: string; signature: string }[] {
  return Array.from({ length: count }, (_, index) => {
    const body = JSON.stringify({ type: 'event_callback', event_id: `Ev${String(index).padStart(8, '0')}`, n: index });
    return { body, signature: `sha256=${createHmac('sha256', SECRET).update(body).digest('hex')}` };
  });
}

/** The payload sizes the webhook figures are measured at. */
export const PAYLOADS = { '1k': { from: 1024, to: 1024 }, '2-8k': { from: 2048, to: 8192 } } as const;

export const WEBHOOK_BENCH_SECRET = SECRET;

/** autocannon requests that POST the bodies in turn, each with a delivery id of its own. */
export function signedDeliveries(bodies: { body: string; signature: string }[]): any[] {
  let next = 0;
  return [{
    method: 'POST',
    setupRequest: (request: any) => {
      const { body, signature } = bodies[next++ % bodies.length]!;
      return { ...request, body, headers: { 'content-type': 'application/json', 'x-github-event': 'push', 'x-github-delivery': randomUUID(), 'x-github-hook-id': '1', 'x-hub-signature-256': signature } };
    },
  }];
}

/** A fresh profile of the bench's home, started, ready for deliveries: one per figure. */
export interface BenchProfile {
  name: string;
  port: number;
  dir: string;
  pid: () => number;
}

/** Waits until a daemon has run every job its store holds (at most a minute): a figure never inherits another's backlog. */
export async function drained(profile: BenchProfile): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (jobsLeft(join(profile.dir, 'state.db')) > 0 && Date.now() < deadline) await sleep(250);
}

const mb = (kib: number) => `${(kib / 1024).toFixed(1)} MB`;

/**
 * Signed 2-8 KB deliveries, each committed with its job before the answer:
 * `synchronous normal` and `full` on two fresh profiles, and the normal
 * daemon again from the moment 50,000 jobs are queued beside it, in rounds
 * that alternate, the load from a process of its own, each round after 2 s
 * of deliveries that warm its daemon and once both daemons ran their backlog;
 * the figures are the medians. Then the normal
 * daemon's memory at peak (through every round, the backlogs' too) and
 * `settleS` after, and 2 s of deliveries that wake it from that idle time.
 */
export async function runWebhookFigures(normal: BenchProfile, full: BenchProfile, options: { rounds: number; duration: number; settleS: number }): Promise<Figure[]> {
  const deliveries = (profile: BenchProfile, duration = options.duration) => loadFrom({ url: `http://127.0.0.1:${profile.port}/webhooks`, connections: 50, duration, deliveries: true });
  const probes = await loadFrom({ url: `http://127.0.0.1:${normal.port}/healthz`, connections: 50, duration: options.duration });
  const ready = rssKiB(normal.pid());
  let peak = ready;
  const runs: Record<'normal' | 'full' | 'backlog', LoadResult[]> = { normal: [], full: [], backlog: [] };
  // How long each backlog lasted into its round (s), and the jobs left after it.
  const lasted: number[] = [];
  let left = 0;
  const normalDb = join(normal.dir, 'state.db');
  const load = machineLoad();
  for (let round = 0; round < options.rounds; round++) {
    for (const [kind, profile] of [['normal', normal], ['full', full], ['backlog', normal]] as const) {
      // Each round after 2 s of deliveries on its daemon, not counted: a daemon idle while the others ran starts warm, as
      // in the probe rounds.
      await deliveries(profile, 2);
      await drained(normal);
      await drained(full);
      // The backlog's jobs, queued as its load starts: its daemon's worker takes them at its next look (within a second)
      // and, warm, runs them in seconds. Written beside the daemon, as another process sharing the store would.
      const queuedAt = kind === 'backlog' ? (queueBacklog(normalDb, 50_000, `r${round}_`), Date.now()) : 0;
      const sampler = profile === normal ? setInterval(() => { peak = Math.max(peak, rssKiB(normal.pid())); }, 250) : undefined;
      runs[kind].push(await deliveries(profile));
      clearInterval(sampler);
      if (kind === 'backlog') {
        const remaining = jobsLeft(normalDb);
        left = Math.max(left, remaining);
        lasted.push(remaining > 0 ? options.duration : (backlogFinishedAt(normalDb, `r${round}_`) - queuedAt) / 1000);
      }
    }
  }
  const rps = (kind: keyof typeof runs) => median(runs[kind].map((run) => run.rps));
  const p99 = (kind: keyof typeof runs) => median(runs[kind].map((run) => run.p99));
  const non2xx = (kind: keyof typeof runs) => runs[kind].reduce((sum, run) => sum + run.non2xx, 0);
  const figures: Figure[] = [{
    name: `POST /webhooks (synchronous normal), 50 conns, median of ${options.rounds}`,
    value: `${rps('normal').toFixed(0)} req/s (p99 ${ms(p99('normal'))} ms${non2xx('normal') ? `, ${non2xx('normal')} non-2xx` : ''})`,
    baseline: `${probes.rps.toFixed(0)} req/s GET /healthz, same daemon; load ${load}, ${probes.generator}`,
    comparison: `${(rps('normal') / probes.rps).toFixed(3)}x`,
    target: '>= 12,000/s, p99 <= 15 ms', ok: non2xx('normal') === 0 && rps('normal') >= 12_000 && p99('normal') <= 15,
  }, {
    name: `POST /webhooks (synchronous full), 50 conns, median of ${options.rounds}, alternating`,
    value: `${rps('full').toFixed(0)} req/s (p99 ${ms(p99('full'))} ms${non2xx('full') ? `, ${non2xx('full')} non-2xx` : ''})`,
    baseline: `${rps('normal').toFixed(0)} req/s synchronous normal`,
    comparison: `${(rps('full') / rps('normal')).toFixed(2)}x normal`,
    target: '>= 0.85x normal', ok: non2xx('full') === 0 && rps('full') >= 0.85 * rps('normal'),
  }, {
    name: `POST /webhooks while 50,000 jobs are queued and running, median of ${options.rounds}, alternating`,
    value: `${rps('backlog').toFixed(0)} req/s (p99 ${ms(p99('backlog'))} ms${non2xx('backlog') ? `, ${non2xx('backlog')} non-2xx` : ''})`,
    baseline: `p99 ${ms(p99('normal'))} ms with an idle queue, ${rps('normal').toFixed(0)} req/s`,
    comparison: `p99 ${(p99('backlog') / p99('normal')).toFixed(2)}x (the backlog ran through ${median(lasted).toFixed(1)} s of each round; ${left} left after)`,
    target: 'p99 <= 1.5x idle', ok: non2xx('backlog') === 0 && p99('backlog') <= 1.5 * p99('normal'),
  }];
  await drained(normal);
  await sleep(options.settleS * 1000);
  const after = rssKiB(normal.pid());
  figures.push({
    name: `daemon RSS under ${options.duration} s rounds of deliveries, the backlog's too (normal)`, value: `peak ${mb(peak)}`, baseline: `${mb(ready)} before the load`,
    comparison: `+${mb(peak - ready)}`, target: '<= +150 MB', ok: peak - ready <= 150 * 1024,
  }, {
    name: `daemon RSS ${options.settleS} s after the deliveries stop`, value: mb(after), baseline: `${mb(ready)} before the load`,
    comparison: `${after >= ready ? '+' : ''}${mb(after - ready)}`, target: '<= +50 MB', ok: after - ready <= 50 * 1024,
  });
  // After that idle time the webhook thread has stopped and its memory-reducing collection has run (and on some hosts
  // the store has left the page cache): the first 2 s of deliveries, beside the idle rounds.
  const woken = await deliveries(normal, 2);
  figures.push({
    name: `POST /webhooks, the first 2 s after ${options.settleS} s idle`, value: `${woken.rps.toFixed(0)} req/s (p99 ${ms(woken.p99)} ms${woken.non2xx ? `, ${woken.non2xx} non-2xx` : ''})`,
    baseline: `p99 ${ms(p99('normal'))} ms, ${rps('normal').toFixed(0)} req/s in the rounds`, comparison: `p99 ${(woken.p99 / p99('normal')).toFixed(2)}x`,
    target: '(reported)', ok: woken.non2xx === 0,
  });
  return figures;
}

/**
 * Queues `count` push jobs straight into a daemon's database, beside the
 * daemon while it idles (each with a 2-8 KB payload, as deliveries leave
 * them): its worker finds them at its next look. Their ids start with
 * `job_backlog` and the tag, which tells one backlog's jobs from another's.
 */
export function queueBacklog(path: string, count: number, tag = ''): void {
  const db = new DatabaseSync(path);
  db.exec('PRAGMA busy_timeout = 10000');
  try {
    const bodies = pushBodies(50);
    const now = Date.now();
    const job = db.prepare("INSERT INTO jobs (id, kind, status, attempts, max_attempts, run_at, created_at, source) VALUES (?, 'github.push', 'queued', 0, 5, ?, ?, ?)");
    const payload = db.prepare('INSERT INTO job_payloads (job_id, payload) VALUES (?, ?)');
    db.exec('BEGIN');
    for (let n = 0; n < count; n++) {
      const id = `job_backlog${tag}${String(n).padStart(6, '0')}`;
      const deliveryId = randomUUID();
      job.run(id, now, now, deliveryId);
      payload.run(id, `{"event":"push","deliveryId":"${deliveryId}","hookId":"9","body":${bodies[n % bodies.length]!.body}}`);
    }
    db.exec('COMMIT');
  } finally {
    db.close();
  }
}

/** When the last job of a backlog (queueBacklog's tag) finished (ms since the epoch). */
function backlogFinishedAt(path: string, tag: string): number {
  const db = new DatabaseSync(path, { readOnly: true });
  try {
    return Number((db.prepare("SELECT max(finished_at) AS at FROM jobs WHERE id >= ? AND id < ?").get(`job_backlog${tag}`, `job_backlog${tag}~`) as { at: number }).at);
  } finally {
    db.close();
  }
}

/** Jobs of a daemon's database not yet finished (read beside the running daemon). */
export function jobsLeft(path: string): number {
  const db = new DatabaseSync(path, { readOnly: true });
  try {
    return Number((db.prepare("SELECT count(*) AS n FROM jobs WHERE status IN ('queued', 'running')").get() as { n: number }).n);
  } finally {
    db.close();
  }
}
