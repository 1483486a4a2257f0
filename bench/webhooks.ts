import { createHmac, randomUUID } from 'node:crypto';
import { DatabaseSync } from 'node:sqlite';
import autocannon from 'autocannon';
import { rssKiB, sleep, type Figure } from './support.ts';

const SECRET = 'bench-webhook-secret';

/** Realistic push bodies of 2-8 KB, each with its signature (the signature covers the body only). */
export function pushBodies(count: number): { body: string; signature: string }[] {
  return Array.from({ length: count }, (_, index) => {
    const target = 2048 + ((index * 6144) / count);
    const commits = [];
    for (let n = 0; JSON.stringify(commits).length < target; n++) {
      commits.push({ id: randomUUID().replace(/-/g, ''), message: `change ${n}: ${'lorem ipsum '.repeat(8)}`, author: { name: 'dev', email: 'dev@example.com' }, added: [], removed: [], modified: ['src/a.ts'] });
    }
    const body = JSON.stringify({ ref: 'refs/heads/main', before: '0'.repeat(40), after: 'b'.repeat(40), repository: { id: 1, full_name: 'acme/widgets' }, head_commit: commits[0], commits });
    return { body, signature: `sha256=${createHmac('sha256', SECRET).update(body).digest('hex')}` };
  });
}

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

/**
 * Signed deliveries per second, each committed with its job before the answer,
 * beside GET /healthz on the same daemon. With `memory`, the daemon's RSS
 * too: at ready, its peak under the load, and `settleS` seconds after the load.
 */
export async function runWebhookBench(port: number, duration: number, label: string, memory?: { pid: number; settleS: number }, options: { skipProbes?: boolean } = {}): Promise<{ figure: Figure; memory?: Figure[]; rps: number; p99: number; clean: boolean }> {
  const bodies = pushBodies(200);
  // The probe baseline first, on an idle daemon; deliveries after, so their backlog cannot slow the baseline.
  const probes = options.skipProbes ? { requests: { average: Number.NaN } } : await autocannon({ url: `http://127.0.0.1:${port}/healthz`, connections: 50, duration });
  const ready = memory ? rssKiB(memory.pid) : 0;
  let peak = ready;
  const sampler = memory ? setInterval(() => { peak = Math.max(peak, rssKiB(memory.pid)); }, 250) : undefined;
  const deliveries = await autocannon({
    url: `http://127.0.0.1:${port}/webhooks`,
    connections: 50,
    duration,
    requests: signedDeliveries(bodies),
  });
  clearInterval(sampler);
  const ok = deliveries.non2xx === 0;
  let memoryFigures: Figure[] | undefined;
  if (memory) {
    peak = Math.max(peak, rssKiB(memory.pid));
    await sleep(memory.settleS * 1000);
    const after = rssKiB(memory.pid);
    const mb = (kib: number) => `${(kib / 1024).toFixed(1)} MB`;
    memoryFigures = [
      {
        name: `daemon RSS under ${duration} s of deliveries (${label})`, value: `peak ${mb(peak)}`, baseline: `${mb(ready)} before the load`,
        comparison: `+${mb(peak - ready)}`, target: '<= +150 MB', ok: peak - ready <= 150 * 1024,
      },
      {
        name: `daemon RSS ${memory.settleS} s after the deliveries stop`, value: mb(after), baseline: `${mb(ready)} before the load`,
        comparison: `${after >= ready ? '+' : ''}${mb(after - ready)}`, target: '<= +50 MB', ok: after - ready <= 50 * 1024,
      },
    ];
  }
  const ratio = deliveries.requests.average / probes.requests.average;
  return {
    rps: deliveries.requests.average,
    p99: deliveries.latency.p99,
    clean: ok,
    memory: memoryFigures,
    figure: {
      name: `POST /webhooks (${label}), 50 conns`,
      value: `${deliveries.requests.average.toFixed(0)} req/s (p99 ${deliveries.latency.p99} ms${ok ? '' : `, ${deliveries.non2xx} non-2xx`})`,
      baseline: `${probes.requests.average.toFixed(0)} req/s GET /healthz, same daemon`,
      comparison: `${ratio.toFixed(3)}x`,
      target: '>= 12,000/s, p99 <= 15 ms',
      ok: ok && deliveries.requests.average >= 12_000 && deliveries.latency.p99 <= 15,
    },
  };
}

/**
 * Queues `count` push jobs straight into a daemon's database, beside the
 * daemon while it idles (each with a 2-8 KB payload, as deliveries leave
 * them): its worker finds them at its next look.
 */
export function queueBacklog(path: string, count: number): void {
  const db = new DatabaseSync(path);
  db.exec('PRAGMA busy_timeout = 10000');
  try {
    const bodies = pushBodies(50);
    const now = Date.now();
    const job = db.prepare("INSERT INTO jobs (id, kind, status, attempts, max_attempts, run_at, created_at, source) VALUES (?, 'github.push', 'queued', 0, 5, ?, ?, ?)");
    const payload = db.prepare('INSERT INTO job_payloads (job_id, payload) VALUES (?, ?)');
    db.exec('BEGIN');
    for (let n = 0; n < count; n++) {
      const id = `job_backlog${String(n).padStart(6, '0')}`;
      const deliveryId = randomUUID();
      job.run(id, now, now, deliveryId);
      payload.run(id, `{"event":"push","deliveryId":"${deliveryId}","hookId":"9","body":${bodies[n % bodies.length]!.body}}`);
    }
    db.exec('COMMIT');
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
