import type { Logger } from 'pino';
import type { JobContext, JobKind } from '../kernel/module.ts';
import type { Db, Store, Tx } from '../store/database.ts';
import { inTransaction } from '../store/engine.ts';
import { type ClaimedJob, type FirstAttempt, JOB_LIMITS, type JobQueue } from './job-queue.ts';

export interface JobWorkerOptions {
  queue: JobQueue;
  /** The handler of a job kind in the table in force. */
  handler: (kind: string) => JobKind | undefined;
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

/**
 * What a handler of a job is given: where it reads and writes, and `send` for
 * writes it does not wait for. In a transaction those go out with what
 * follows them; on the store each is its own statement, and the attempt waits
 * for all of them (`sent`) before its outcome is recorded.
 */
function contextOf(job: ClaimedJob | { id: string }, attempt: number, db: Db): { context: JobContext; sent: () => Promise<unknown> } {
  if (inTransaction(db)) return { context: { db, send: (sql, ...params) => db.send(sql, ...params), jobId: job.id, attempt }, sent: async () => undefined };
  const writes: Promise<unknown>[] = [];
  return { context: { db, send: (sql, ...params) => void writes.push(db.run(sql, ...params)), jobId: job.id, attempt }, sent: () => Promise.all(writes) };
}

/** Runs a handler in a context; resolves with its result once every write it sent is made. */
async function attempt(kind: JobKind, job: { id: string; payload: unknown }, tries: number, db: Db): Promise<unknown> {
  const { context, sent } = contextOf(job, tries, db);
  const result = await kind.run(job.payload, context);
  await sent();
  return result;
}

/** How often an idle worker looks for jobs whose time has come (enqueues wake it at once). */
const IDLE_POLL_MS = 1000;
/** How soon a worker whose writes failed (a full disk) tries again. */
const TROUBLE_RETRY_MS = 2000;

type Outcome = { succeeded: true; result: unknown } | { succeeded: false; error: unknown };

/**
 * Runs queued jobs in the daemon with bounded concurrency. A group of jobs is
 * claimed at once; the handlers that only touch the store (`transactional`)
 * run together and their outcomes are recorded together (on SQLite in the
 * claim's own transaction, each handler a savepoint of it; on PostgreSQL side
 * by side, their outcomes in one statement); the others run on their own and
 * record their outcome when they end.
 */
export class JobWorker {
  private running = new Map<string, Promise<void>>();
  /** Outcomes of finished jobs that could not be written yet (the storage failed); written before anything else is claimed. */
  private unrecorded: (() => Promise<void>)[] = [];
  /** Why the last attempt to write failed, while it keeps failing (said once, not at every try). */
  private trouble?: string;
  private started = false;
  private stopped = false;
  /** The worker gave way to work that goes first (yieldTo), which resumes it. */
  private yielded = false;
  private scheduled = false;
  private pumping = false;
  private pumpAgain = false;
  private timer?: NodeJS.Timeout;
  private leases?: NodeJS.Timeout;
  private readonly options: JobWorkerOptions;

  constructor(options: JobWorkerOptions) {
    this.options = options;
    options.queue.onEnqueued(() => this.schedule());
  }

  async start(): Promise<void> {
    const { queue, store, logger } = this.options;
    // Alone on its SQLite file, a daemon that starts knows every running job was left by a previous run; sharing a
    // database, it takes back only jobs whose daemon stopped renewing their lease, now and every few seconds.
    const { shared } = store.dialect;
    if (this.options.requeueAtStart !== false) {
      await store.bookkeeping(async () => {
        const requeued = await queue.requeueInterrupted({ all: !shared });
        if (requeued > 0) logger.warn({ jobs: requeued }, 'requeued jobs a previous run left running');
      });
    }
    // Jobs are claimed only once those a previous run left are back in the queue.
    this.started = true;
    // Every third of the lease: a claim is renewed twice before it could lapse.
    this.leases = setInterval(() => {
      void store.bookkeeping(async () => {
        if (this.running.size > 0) await queue.renewLeases();
        if (!shared) return;
        const taken = await queue.requeueInterrupted();
        if (taken > 0) logger.warn({ jobs: taken }, 'requeued jobs whose daemon stopped renewing their lease');
      }).catch((error: unknown) => logger.warn({ err: error }, 'job leases could not be renewed'));
    }, queue.leaseMs / 3);
    this.leases.unref();
    void this.pump();
  }

  /** Called by the work that goes first (yieldTo) once it has run: a worker that gave way to it looks for jobs now. */
  resume(): void {
    if (!this.yielded) return;
    this.yielded = false;
    void this.pump();
  }

  get active(): number {
    return this.running.size;
  }

  /** Coalesces the many wake-ups of a busy moment into one pump. */
  private schedule(): void {
    if (this.scheduled || this.stopped || !this.started) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      void this.pump();
    });
  }

  /** One pump at a time: a wake-up during one makes another follow it. */
  private async pump(): Promise<void> {
    if (this.stopped || !this.started) return;
    if (this.pumping) {
      this.pumpAgain = true;
      return;
    }
    this.pumping = true;
    try {
      await this.pumpOnce();
    } finally {
      this.pumping = false;
      if (this.pumpAgain) {
        this.pumpAgain = false;
        this.schedule();
      }
    }
  }

  private async pumpOnce(): Promise<void> {
    const { queue, store } = this.options;
    clearTimeout(this.timer);
    let free = this.options.concurrency - this.running.size;
    const before = this.options.yieldTo?.();
    if (before?.waiting) {
      this.yielded = true;
      return;
    }
    if (before) free = Math.min(free, before.claim);
    let claimed = 0;
    try {
      // Outcomes still to be written go first: nothing new is claimed over them.
      while (this.unrecorded.length > 0) {
        await this.unrecorded[0]!();
        this.unrecorded.shift();
      }
      // With one writer (SQLite), only when a job is due: an empty claim still takes the database's one write lock,
      // and an idle worker's poll would wait behind another thread's stream of commits; a read never waits.
      const { oneWriter } = store.dialect;
      if (free > 0 && (!oneWriter || (await queue.hasDue()))) {
        claimed = oneWriter ? await this.claimInTransaction(free) : await this.claimAndRun(free);
      }
      this.recovered();
    } catch (error) {
      // The storage failed (a full disk): nothing of the group was kept; the worker waits and tries again.
      this.retryLater(error);
      return;
    }
    if (this.stopped) return;
    if (claimed > 0 && claimed === free) this.schedule();
    let next: number | undefined;
    try {
      next = await queue.nextRunAt();
    } catch (error) {
      // The database went away between the claim and this read (PostgreSQL restarting): the jobs taken run on.
      this.retryLater(error);
      return;
    }
    if (this.stopped) return;
    clearTimeout(this.timer);
    const wait = next === undefined ? IDLE_POLL_MS : Math.max(10, Math.min(IDLE_POLL_MS, next - Date.now()));
    this.timer = setTimeout(() => void this.pump(), wait);
    this.timer.unref();
  }

  private retryLater(error: unknown): void {
    this.troubled(error);
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.pump(), TROUBLE_RETRY_MS);
    this.timer.unref();
  }

  /**
   * With one writer (SQLite): claims a group and runs its store-only handlers in one
   * transaction, each handler a savepoint of it, so one failing job undoes
   * only its own work; their outcomes commit with them. The other handlers
   * start once the transaction committed.
   */
  private async claimInTransaction(free: number): Promise<number> {
    const { queue, store } = this.options;
    const later: [ClaimedJob, JobKind][] = [];
    const count = await store.transaction(async (tx) => {
      const jobs = await queue.claim(free, tx);
      const succeeded: [string, unknown][] = [];
      for (const job of jobs) {
        const kind = await this.handlerOf(job, tx);
        if (!kind) continue;
        if (!kind.transactional) {
          later.push([job, kind]);
          continue;
        }
        try {
          succeeded.push([job.id, await tx.transaction((savepoint) => attempt(kind, job, job.attempts, savepoint))]);
        } catch (error) {
          if (tx.lost) throw error;
          await this.failed(job, error, tx);
        }
      }
      for (const id of await queue.succeedMany(succeeded, tx)) this.lost(jobs.find((job) => job.id === id)!);
      return jobs.length;
    });
    for (const [job, kind] of later) this.track(job, kind);
    return count;
  }

  /**
   * Side by side (PostgreSQL): claims a group in one statement, runs its store-only handlers
   * side by side (their statements travel together; jobs of an ordered kind
   * one after another) and records their outcomes in one statement; the other
   * handlers run on their own.
   */
  private async claimAndRun(free: number): Promise<number> {
    const { queue, store } = this.options;
    const jobs = await queue.claim(free);
    const outcomes: Promise<[ClaimedJob, Outcome]>[] = [];
    let ordered: Promise<unknown> = Promise.resolve();
    for (const job of jobs) {
      const kind = await this.handlerOf(job, store);
      if (!kind) continue;
      if (!kind.transactional) {
        this.track(job, kind);
        continue;
      }
      const run = () => attempt(kind, job, job.attempts, store)
        .then((result): [ClaimedJob, Outcome] => [job, { succeeded: true, result }], (error: unknown): [ClaimedJob, Outcome] => [job, { succeeded: false, error }]);
      const outcome = kind.ordered ? ordered.then(run) : run();
      if (kind.ordered) ordered = outcome;
      outcomes.push(outcome);
    }
    const settled = await Promise.all(outcomes);
    const succeeded = settled.filter(([, outcome]) => outcome.succeeded).map(([job, outcome]) => [job.id, (outcome as { result: unknown }).result] as [string, unknown]);
    const record = async () => {
      for (const id of await queue.succeedMany(succeeded)) this.lost(jobs.find((job) => job.id === id)!);
      for (const [job, outcome] of settled) if (!outcome.succeeded) await this.failed(job, outcome.error);
    };
    try {
      await record();
    } catch (error) {
      this.troubled(error);
      this.unrecorded.push(record);
    }
    return jobs.length;
  }

  /** The handler of a claimed job; a job nobody handles fails for good. */
  private async handlerOf(job: ClaimedJob, db: Db): Promise<JobKind | undefined> {
    const kind = this.options.handler(job.kind);
    if (kind) return kind;
    await this.options.queue.fail({ ...job, maxAttempts: job.attempts }, `no handler for job kind ${job.kind}`, db);
    this.options.logger.warn({ job: job.id, kind: job.kind }, 'no handler for job kind');
    return undefined;
  }

  /**
   * Makes the first attempts of jobs as they are queued, inside the caller's
   * transaction, for those whose handlers only touch the store; the caller
   * queues each with its outcome (JobQueue.enqueue's `ran`), and the others
   * as usual. Jobs of an ordered kind run here only when `ordered` says no
   * job could be overtaken (none of the lane waits before them).
   *
   * On SQLite each handler runs in a savepoint, one after another: a failing
   * attempt undoes only its own writes and is recorded failed. On PostgreSQL
   * they run side by side (their statements travel together) and a failing
   * one fails the whole transaction: the caller records the group again
   * without running anything at once, and the jobs take their turn.
   */
  async runAtOnce(jobs: readonly { id: string; kind: string; payload: unknown }[], tx: Tx, ordered: () => boolean | Promise<boolean> = () => false): Promise<Map<string, FirstAttempt>> {
    const outcomes = new Map<string, FirstAttempt>();
    if (this.stopped) return outcomes;
    const runnable: { job: (typeof jobs)[number]; kind: JobKind }[] = [];
    let inOrder: boolean | undefined;
    for (const job of jobs) {
      const kind = this.options.handler(job.kind);
      if (!kind?.transactional) continue;
      // Asked once, and only when an ordered kind comes.
      if (kind.ordered && !(inOrder ??= await ordered())) continue;
      runnable.push({ job, kind });
    }
    if (!tx.dialect.oneWriter) {
      const results = await Promise.all(runnable.map(({ job, kind }) => attempt(kind, job, 1, tx)));
      runnable.forEach(({ job }, index) => outcomes.set(job.id, { status: 'succeeded', result: results[index] }));
      return outcomes;
    }
    for (const { job, kind } of runnable) {
      try {
        const result = await tx.transaction((savepoint) => attempt(kind, job, 1, savepoint));
        outcomes.set(job.id, { status: 'succeeded', result });
      } catch (error) {
        // The storage failed under the whole transaction, not just this attempt: the caller's transaction fails with it.
        if (tx.lost) throw error;
        outcomes.set(job.id, { status: 'failed', error: this.attemptFailed({ ...job, attempts: 1, maxAttempts: JOB_LIMITS.defaultMaxAttempts }, error) });
      }
    }
    return outcomes;
  }

  /** Runs a job whose handler does more than touch the store, on its own; a free place then takes the next job. */
  private track(job: ClaimedJob, kind: JobKind): void {
    const run = this.finish(job, Promise.resolve().then(() => attempt(kind, job, job.attempts, this.options.store)))
      .finally(() => {
        this.running.delete(job.id);
        this.schedule();
      });
    this.running.set(job.id, run);
  }

  /** Completes a job that ran on its own; an outcome that cannot be written now is kept and written later. */
  private async finish(job: ClaimedJob, pending: Promise<unknown>): Promise<void> {
    let outcome: () => Promise<void>;
    try {
      const result = await pending;
      outcome = async () => {
        if (!(await this.options.queue.succeed(job.id, result))) this.lost(job);
      };
    } catch (error) {
      outcome = () => this.failed(job, error);
    }
    try {
      await outcome();
    } catch (error) {
      this.troubled(error);
      this.unrecorded.push(outcome);
    }
  }

  private async failed(job: ClaimedJob, error: unknown, db?: Db): Promise<void> {
    if (!(await this.options.queue.fail(job, this.attemptFailed(job, error), db))) this.lost(job);
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
