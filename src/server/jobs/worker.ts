import type { Logger } from 'pino';
import type { JobHandler } from '../kernel/module.ts';
import type { Store } from '../store/database.ts';
import { type ClaimedJob, type FirstAttempt, JOB_LIMITS, type JobQueue } from './job-queue.ts';

export interface JobWorkerOptions {
  queue: JobQueue;
  /** The handler of a job kind in the table in force. */
  handler: (kind: string) => JobHandler | undefined;
  store: Store;
  logger: Logger;
  concurrency: number;
  /**
   * Whether start() takes back the jobs a previous run left running (the
   * daemon's own worker does); a second worker of the same daemon, started
   * later, must not take back the jobs the first is running.
   */
  requeueAtStart?: boolean;
  /**
   * Work of the same thread that goes before queued jobs (a webhook thread's
   * deliveries). While some of it waits, the worker claims nothing and looks
   * again when that work calls resume(); while it comes at all, the worker
   * claims groups of at most `claim` jobs, so what comes next waits less
   * behind them. A worker alone in its thread needs none.
   */
  yieldTo?: () => { waiting: boolean; claim: number };
}

const isThenable = (value: unknown): value is PromiseLike<unknown> =>
  typeof (value as PromiseLike<unknown> | null)?.then === 'function';

/** How often an idle worker looks for jobs whose time has come (enqueues wake it at once). */
const IDLE_POLL_MS = 1000;
/** How soon a worker whose writes failed (a full disk) tries again. */
const TROUBLE_RETRY_MS = 2000;

/** Runs queued jobs in the daemon with bounded concurrency. */
export class JobWorker {
  private running = new Map<string, Promise<void>>();
  /** Outcomes of finished jobs that could not be written yet (the storage failed); written before anything else is claimed. */
  private unrecorded: (() => void)[] = [];
  /** Why the last attempt to write failed, while it keeps failing (said once, not at every try). */
  private trouble?: string;
  private stopped = false;
  /** The worker gave way to work that goes first (yieldTo), which resumes it. */
  private yielded = false;
  private scheduled = false;
  private timer?: NodeJS.Timeout;
  private leases?: NodeJS.Timeout;
  private readonly options: JobWorkerOptions;

  constructor(options: JobWorkerOptions) {
    this.options = options;
    options.queue.onEnqueued(() => this.schedule());
  }

  start(): void {
    const { queue, store, logger } = this.options;
    // Alone on its SQLite file, a daemon that starts knows every running job was left by a previous run; sharing a
    // database, it takes back only jobs whose daemon stopped renewing their lease, now and every few seconds.
    const shared = store.kind === 'postgres';
    const requeued = this.options.requeueAtStart === false ? 0 : queue.requeueInterrupted({ all: !shared });
    if (requeued > 0) logger.warn({ jobs: requeued }, 'requeued jobs a previous run left running');
    // Every third of the lease: a claim is renewed twice before it could lapse.
    this.leases = setInterval(() => {
      store.bookkeeping(() => {
        if (this.running.size > 0) queue.renewLeases();
        if (!shared) return;
        const taken = queue.requeueInterrupted();
        if (taken > 0) logger.warn({ jobs: taken }, 'requeued jobs whose daemon stopped renewing their lease');
      });
    }, queue.leaseMs / 3);
    this.leases.unref();
    this.pump();
  }

  /** Called by the work that goes first (yieldTo) once it has run: a worker that gave way to it looks for jobs now. */
  resume(): void {
    if (!this.yielded) return;
    this.yielded = false;
    this.pump();
  }

  get active(): number {
    return this.running.size;
  }

  /** Coalesces the many wake-ups of a busy moment into one pump. */
  private schedule(): void {
    if (this.scheduled || this.stopped) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.pump();
    });
  }

  private pump(): void {
    if (this.stopped) return;
    clearTimeout(this.timer);
    let free = this.options.concurrency - this.running.size;
    const before = this.options.yieldTo?.();
    if (before?.waiting) {
      this.yielded = true;
      return;
    }
    if (before) free = Math.min(free, before.claim);
    let claimed: ClaimedJob[] = [];
    let waiting: [ClaimedJob, PromiseLike<unknown>][] = [];
    try {
      // Outcomes still to be written go first: nothing new is claimed over them.
      while (this.unrecorded.length > 0) {
        this.unrecorded[0]!();
        this.unrecorded.shift();
      }
      // Claiming and running a group share one commit. On SQLite, only when a job is due: an empty claim still takes
      // the database's one write lock, and an idle worker's poll would wait (its whole thread with it) behind another
      // thread's stream of commits; a read never waits.
      if (free > 0 && (this.options.store.kind !== 'sqlite' || this.options.queue.hasDue())) {
        this.options.store.transaction(() => {
          claimed = this.options.queue.claim(free);
          waiting = this.runGroup(claimed);
        });
      }
      this.recovered();
    } catch (error) {
      // The storage failed (a full disk): nothing of the group was kept; the worker waits and tries again.
      this.retryLater(error);
      return;
    }
    for (const [job, pending] of waiting) this.track(job, pending);
    if (claimed.length > 0 && claimed.length === free) this.schedule();
    let next: number | undefined;
    try {
      next = this.options.queue.nextRunAt();
    } catch (error) {
      // The database went away between the commit and this read (PostgreSQL restarting): the jobs taken run on.
      this.retryLater(error);
      return;
    }
    const wait = next === undefined ? IDLE_POLL_MS : Math.max(10, Math.min(IDLE_POLL_MS, next - Date.now()));
    this.timer = setTimeout(() => this.pump(), wait);
    this.timer.unref();
  }

  private retryLater(error: unknown): void {
    this.troubled(error);
    this.timer = setTimeout(() => this.pump(), TROUBLE_RETRY_MS);
    this.timer.unref();
  }

  /**
   * Runs a group of claimed jobs in one transaction: each job's synchronous
   * writes and its completion are a savepoint of it, so one failing job undoes
   * only its own work. Returns the jobs whose handlers went asynchronous, with
   * what they are waiting for; the rest are finished when this returns.
   */
  private runGroup(jobs: ClaimedJob[]): [ClaimedJob, PromiseLike<unknown>][] {
    const { queue, store, logger } = this.options;
    const waiting: [ClaimedJob, PromiseLike<unknown>][] = [];
    if (jobs.length === 0) return waiting;
    store.transaction(() => {
      // Outcomes are recorded together at the end of the group, in the group's transaction: a handler's writes and
      // its job's outcome still commit together, or not at all.
      const succeeded: [string, unknown][] = [];
      for (const job of jobs) {
        const handler = this.options.handler(job.kind);
        if (!handler) {
          queue.fail({ ...job, maxAttempts: job.attempts }, `no handler for job kind ${job.kind}`);
          logger.warn({ job: job.id, kind: job.kind }, 'no handler for job kind');
          continue;
        }
        try {
          store.transaction(() => {
            const result = handler(job.payload, { store, jobId: job.id, attempt: job.attempts });
            if (isThenable(result)) waiting.push([job, result]);
            else succeeded.push([job.id, result]);
          });
        } catch (error) {
          if (store.transactionLost) throw error;
          this.failed(job, error);
        }
      }
      for (const id of queue.succeedMany(succeeded)) this.lost(jobs.find((job) => job.id === id)!);
    });
    return waiting;
  }

  /**
   * Makes a job's first attempt as it is queued, inside the caller's
   * transaction; the caller makes sure no job of this worker's lane waits
   * before it, so jobs still run in the order they came. The handler's writes
   * are a savepoint: a failing attempt undoes only its own. Returns the
   * outcome to record with the job (JobQueue.enqueue's `ran`), or undefined
   * (no handler, or the worker stops) to queue it as usual.
   */
  runNow(job: { id: string; kind: string; payload: unknown }): FirstAttempt | undefined {
    const { store } = this.options;
    const handler = this.options.handler(job.kind);
    if (!handler || this.stopped) return undefined;
    const claimed: ClaimedJob = { ...job, attempts: 1, maxAttempts: JOB_LIMITS.defaultMaxAttempts };
    let result: unknown;
    try {
      store.transaction(() => {
        result = handler(job.payload, { store, jobId: job.id, attempt: 1 });
      });
    } catch (error) {
      // The storage failed under the whole transaction, not just this attempt: the caller's transaction fails with it.
      if (store.transactionLost) throw error;
      return { status: 'failed', error: this.attemptFailed(claimed, error) };
    }
    if (!isThenable(result)) return { status: 'succeeded', result };
    // Recorded running, claimed by this daemon, and finished when the handler is.
    this.track(claimed, result);
    return { status: 'running' };
  }

  /** Follows a job whose handler went asynchronous until it finishes; a free place then takes the next job. */
  private track(job: ClaimedJob, pending: PromiseLike<unknown>): void {
    const run = this.finish(job, pending).finally(() => {
      this.running.delete(job.id);
      this.schedule();
    });
    this.running.set(job.id, run);
  }

  /** Completes a job whose handler went asynchronous; an outcome that cannot be written now is kept and written later. */
  private async finish(job: ClaimedJob, pending: PromiseLike<unknown>): Promise<void> {
    let outcome: () => void;
    try {
      const result = await pending;
      outcome = () => {
        if (!this.options.queue.succeed(job.id, result)) this.lost(job);
      };
    } catch (error) {
      outcome = () => this.failed(job, error);
    }
    try {
      outcome();
    } catch (error) {
      this.troubled(error);
      this.unrecorded.push(outcome);
    }
  }

  private failed(job: ClaimedJob, error: unknown): void {
    if (!this.options.queue.fail(job, this.attemptFailed(job, error))) this.lost(job);
  }

  /** Says a failed attempt in the log; returns what is recorded of it. */
  private attemptFailed(job: ClaimedJob, error: unknown): string {
    this.options.logger.warn({ job: job.id, kind: job.kind, attempt: job.attempts, err: error }, 'job attempt failed');
    return ((error as Error)?.message ?? String(error)).slice(0, 2000);
  }

  /** The job's lease ran out while it ran (the daemon stalled past it): another daemon owns it now, and its outcome here is dropped. */
  private lost(job: ClaimedJob): void {
    this.options.logger.warn({ job: job.id, kind: job.kind }, 'job finished after its lease ran out; another daemon runs it again');
  }

  private troubled(error: unknown): void {
    const message = (error as Error)?.message ?? String(error);
    if (this.trouble === message) return;
    this.trouble = message;
    this.options.logger.warn({ error: message }, 'jobs cannot be written; retrying');
  }

  private recovered(): void {
    if (this.trouble === undefined) return;
    this.trouble = undefined;
    this.options.logger.info('jobs can be written again');
  }

  /** Stops claiming and waits for running jobs up to the bound; returns how many were still running. */
  async drain(timeoutMs: number): Promise<number> {
    this.stopped = true;
    clearTimeout(this.timer);
    clearInterval(this.leases);
    if (this.running.size === 0) return 0;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.allSettled(this.running.values()), new Promise((resolve) => { timer = setTimeout(resolve, timeoutMs); })]);
    clearTimeout(timer);
    return this.running.size;
  }
}
