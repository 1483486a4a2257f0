/**
 * Retention: one job (store.prune) that prunes what every module keeps,
 * each module's pruner deleting what is older than store.retentionDays. It
 * is queued every PRUNE_INTERVAL_MS, counted across restarts: a daemon
 * started ten times a day queues it four times, not ten. Of several daemons
 * sharing a database, the one whose conditional upsert changes the row
 * queues it: the row is the lock.
 */
import type { Store } from '../store/database.ts';
import type { JobQueue } from './job-queue.ts';

export const PRUNE_JOB = 'store.prune';
export const PRUNE_INTERVAL_MS = 6 * 60 * 60_000;

export type Pruner = (retentionMs: number) => Promise<number>;

export class Retention {
  private readonly store: Store;
  private readonly queue: Pick<JobQueue, 'enqueue' | 'prune'>;
  private readonly now: () => number;
  private readonly pruners = new Map<string, Pruner>();

  constructor(store: Store, queue: Pick<JobQueue, 'enqueue' | 'prune'>, now: () => number = Date.now) {
    this.store = store;
    this.queue = queue;
    this.now = now;
  }

  /** Adds a module's pruner: it deletes what is older than the retention (in ms) and says how much. */
  add(name: string, prune: Pruner): void {
    this.pruners.set(name, prune);
  }

  /** The job's work: the queue's own old jobs, then every module's; how many each pruned. */
  async prune(days: number): Promise<Record<string, number>> {
    const pruned: Record<string, number> = { jobs: await this.queue.prune(days) };
    for (const [name, prune] of this.pruners) pruned[name] = await prune(days * 86_400_000);
    return pruned;
  }

  /** Queues the job when the last was queued an interval ago or more (by this daemon or another); says whether it did. */
  async queueIfDue(): Promise<boolean> {
    const last = await this.store.get<{ last_queued_at: number }>('SELECT last_queued_at FROM job_schedules WHERE name = ?', PRUNE_JOB);
    if (last && this.now() - Number(last.last_queued_at) < PRUNE_INTERVAL_MS) return false;
    return this.store.transaction(async (tx) => {
      const now = this.now();
      const won = await tx.run(`INSERT INTO job_schedules (name, last_queued_at) VALUES (?, ?)
        ON CONFLICT (name) DO UPDATE SET last_queued_at = excluded.last_queued_at WHERE job_schedules.last_queued_at <= ?`, PRUNE_JOB, now, now - PRUNE_INTERVAL_MS);
      if (won.changes !== 1) return false;
      await this.queue.enqueue({ kind: PRUNE_JOB, payload: null, maxAttempts: 1 }, tx);
      return true;
    });
  }
}
