/**
 * Durable jobs: the queue in the profile's database, the worker that runs
 * them with the handlers in the table, GET /jobs, their RPC methods and
 * tools, and the retention job that prunes what every module keeps.
 */
import { ROUTE_SCOPES } from '../../shared/api/routes.ts';
import { DomainError } from '../kernel/errors.ts';
import { errorResponse, jsonResponse, protectedErrors, security } from '../kernel/api-doc.ts';
import { defineModule } from '../kernel/module.ts';
import { jobFilter } from './job-filter.ts';
import { JobQueue } from './job-queue.ts';
import { JOB_MIGRATIONS } from './migrations.ts';
import { JobWorker } from './worker.ts';

const PRUNE_JOB = 'store.prune';
const PRUNE_INTERVAL_MS = 6 * 60 * 60_000;
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
    const pruners = new Map<string, (retentionMs: number) => Promise<number>>();
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

    ctx.jobs.handle(PRUNE_JOB, async () => {
      const days = ctx.config().store.retentionDays;
      const pruned: Record<string, number> = { jobs: await queue.prune(days) };
      for (const [name, prune] of pruners) pruned[name] = await prune(days * 86_400_000);
      return pruned;
    });
    // Retention runs as a job every PRUNE_INTERVAL_MS, counted across restarts: a daemon started ten times a day queues it four times, not ten.
    // Of several daemons sharing a database, the one whose conditional upsert changes the row queues it: the row is the lock.
    const queueIfDue = async () => {
      const last = await store.get<{ last_queued_at: number }>('SELECT last_queued_at FROM job_schedules WHERE name = ?', PRUNE_JOB);
      if (last && Date.now() - Number(last.last_queued_at) < PRUNE_INTERVAL_MS) return;
      await store.transaction(async (tx) => {
        const now = Date.now();
        const won = await tx.run(`INSERT INTO job_schedules (name, last_queued_at) VALUES (?, ?)
          ON CONFLICT (name) DO UPDATE SET last_queued_at = excluded.last_queued_at WHERE job_schedules.last_queued_at <= ?`, PRUNE_JOB, now, now - PRUNE_INTERVAL_MS);
        if (won.changes === 1) await queue.enqueue({ kind: PRUNE_JOB, payload: null, maxAttempts: 1 }, tx);
      });
    };
    const scheduleRetention = () => store.bookkeeping(queueIfDue).catch((error: unknown) => ctx.log.warn({ err: error }, 'the retention job could not be queued'));
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

    ctx.http.reserve('/jobs');
    ctx.http.document({
      paths: {
        '/jobs': {
          get: {
            summary: 'list jobs, newest first', ...security('GET /jobs'),
            parameters: [
              { name: 'status', in: 'query', schema: { type: 'string', enum: ['queued', 'running', 'succeeded', 'failed'] } },
              { name: 'kind', in: 'query', schema: { type: 'string' } },
              { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 200, default: 50 } },
              { name: 'cursor', in: 'query', schema: { type: 'string' } },
            ],
            responses: { 200: jsonResponse('JobList', 'a page of jobs'), ...protectedErrors },
          },
        },
        '/jobs/{id}': {
          get: {
            summary: 'one job', ...security('GET /jobs/:id'),
            parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }],
            responses: { 200: jsonResponse('Job', 'the job'), ...protectedErrors, 404: errorResponse('no such job') },
          },
        },
      },
    });
    ctx.http.route({
      method: 'GET', path: '/jobs', auth: { scope: ROUTE_SCOPES['GET /jobs'] },
      handler: async (http) => { http.body = await queue.list(jobFilter(http.query)); },
    });
    ctx.http.route({
      method: 'GET', path: '/jobs/:id', auth: { scope: ROUTE_SCOPES['GET /jobs/:id'] },
      handler: async (http) => { http.body = await existing(http.params.id); },
    });

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

    ctx.tools.add({
      name: 'jobs.enqueue',
      description: 'Queue a job of a kind some handler runs; returns the job.',
      inputSchema: {
        type: 'object',
        additionalProperties: false,
        required: ['kind'],
        properties: {
          kind: { type: 'string', minLength: 1, maxLength: 64 },
          payload: {},
          maxAttempts: { type: 'integer', minimum: 1, maximum: 20 },
          runAt: { type: 'string', format: 'date-time' },
        },
      },
      handler: async (args) => {
        const kind = String(args.kind);
        if (!handles(kind)) throw new DomainError('invalid', `No handler runs jobs of kind ${kind}.`);
        const id = await queue.enqueue({
          kind, payload: args.payload ?? null, source: 'tools',
          ...(args.maxAttempts ? { maxAttempts: Number(args.maxAttempts) } : {}),
          ...(args.runAt ? { runAt: Date.parse(String(args.runAt)) } : {}),
        });
        return queue.get(id);
      },
    });
    ctx.tools.add({
      name: 'jobs.get',
      description: 'One job: its state, attempts, error and result.',
      inputSchema: { type: 'object', additionalProperties: false, required: ['id'], properties: { id: { type: 'string', minLength: 1, maxLength: 128 } } },
      handler: (args) => existing(String(args.id)),
    });

    return { queue, handles, retention: (name, prune) => void pruners.set(name, prune), runAtOnce: (jobs, tx) => worker.runAtOnce(jobs, tx) };
  },
});
