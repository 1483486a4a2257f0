/**
 * Durable jobs: the queue in the profile's database, the worker that runs
 * them with the handlers in the table, GET /jobs (routes.ts), their RPC
 * methods and tools (job-tools.ts), and the retention job that prunes what
 * every module keeps (retention.ts).
 */
import { DomainError } from '../kernel/errors.ts';
import { defineModule } from '../kernel/module.ts';
import { jobFilter } from './job-filter.ts';
import { JobQueue } from './job-queue.ts';
import { jobTools } from './job-tools.ts';
import { JOB_MIGRATIONS } from './migrations.ts';
import { PRUNE_JOB, Retention } from './retention.ts';
import { jobRoutes } from './routes.ts';
import { JobWorker } from './worker.ts';

/** How often the daemon looks whether a periodic job is due. */
const SCHEDULE_CHECK_MS = 10 * 60_000;

// The queue and the worker, for a thread of the daemon that runs a lane of jobs with a connection of its own.
export { JobQueue, JobWorker };
export type { FirstAttempt, NewJob } from './job-queue.ts';
export { WEBHOOK_LANE, type JobLane } from './job-sql.ts';

/** The most often the jobs.changed event is sent. */
export const JOBS_CHANGED_MS = 250;

/** What other modules get from this one. */
export interface Jobs {
  queue: JobQueue;
  /** Whether some handler in the table runs jobs of this kind. */
  handles(kind: string): boolean;
  /** Adds a pruner to the retention job: it deletes what is older than the retention (in ms) and says how much. */
  retention(name: string, prune: (retentionMs: number) => Promise<number>): void;
  /** Makes new jobs' first attempts in the transaction that queues them, for the store-only kinds that owe no order (JobWorker.runAtOnce). */
  runAtOnce: JobWorker['runAtOnce'];
}


export default defineModule<Jobs>({
  id: 'jobs',
  migrations: JOB_MIGRATIONS,
  setup(ctx) {
    const { store } = ctx;
    const queue = new JobQueue(store, { owner: ctx.daemon.instanceId, leaseMs: ctx.config().jobs.leaseSeconds * 1000 });
    const handles = (kind: string) => ctx.table().jobHandler(kind) !== undefined;
    const existing = async (id: string) => {
      const job = await queue.get(id);
      if (!job) throw new DomainError('not_found', `No job ${id}.`);
      return job;
    };
    // Live views (the Control UI's Jobs page) hear of changes at most every JOBS_CHANGED_MS, however many jobs change.
    let told: NodeJS.Timeout | undefined;
    queue.onChanged(() => {
      told ??= setTimeout(() => {
        told = undefined;
        ctx.events.emit('jobs.changed', { at: new Date().toISOString() }, 'operator.read');
      }, JOBS_CHANGED_MS).unref();
    });
    // Sharing a PostgreSQL store: another daemon's jobs.changed (its NOTIFY) wakes this daemon's idle worker.
    store.coordinator?.onEvent((event) => {
      if (event === 'jobs.changed') queue.wake();
    });
    const worker = new JobWorker({
      queue, store, logger: ctx.log, concurrency: ctx.config().jobs.concurrency, handler: (kind) => ctx.table().jobHandler(kind)?.value,
    });

    const retention = new Retention(store, queue);
    ctx.jobs.handle(PRUNE_JOB, () => retention.prune(ctx.config().store.retentionDays));
    const scheduleRetention = () => store.bookkeeping(() => retention.queueIfDue()).catch((error: unknown) => ctx.log.warn({ err: error }, 'the retention job could not be queued'));
    let pruneTimer: NodeJS.Timeout | undefined;
    ctx.onStart(async () => {
      await worker.start();
      void scheduleRetention();
      pruneTimer = setInterval(() => void scheduleRetention(), SCHEDULE_CHECK_MS).unref();
    });
    ctx.onStop(async (deadline) => {
      clearInterval(pruneTimer);
      const unfinished = await worker.drain(Math.max(0, deadline - Date.now()));
      if (unfinished > 0) ctx.log.warn({ jobs: unfinished }, 'stopping with jobs still running; they run again at the next start');
    });

    jobRoutes(ctx.http, queue, existing);
    ctx.rpc.method({ name: 'jobs.list', handler: (params) => queue.list(jobFilter(Object.fromEntries(Object.entries(params).map(([key, value]) => [key, String(value)])))) });
    ctx.rpc.method({ name: 'jobs.get', handler: ({ id }) => existing(id) });
    ctx.rpc.method({
      name: 'jobs.retry',
      handler: async ({ id }) => {
        const outcome = await queue.retry(id);
        if (outcome === undefined) throw new DomainError('not_found', `No job ${id}.`);
        if (outcome === 'not-failed') throw new DomainError('conflict', `Job ${id} has not failed; only a failed job can be retried.`);
        return outcome;
      },
    });
    for (const tool of jobTools(queue, handles, existing)) ctx.tools.add(tool);

    return { queue, handles, retention: (name, prune) => retention.add(name, prune), runAtOnce: (jobs, tx) => worker.runAtOnce(jobs, tx) };
  },
});
