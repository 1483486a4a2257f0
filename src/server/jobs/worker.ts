import type { Logger } from 'pino';
import type { Store } from '../store/database.ts';
import type { JobHandlers } from './job-handlers.ts';
import type { ClaimedJob, JobQueue } from './job-queue.ts';

/** How often an idle worker looks for jobs whose time has come (enqueues wake it at once). */
const IDLE_POLL_MS = 1000;

/** Runs queued jobs in the daemon with bounded concurrency. */
export class JobWorker {
  private running = new Map<string, Promise<void>>();
  private stopped = false;
  private scheduled = false;
  private timer?: NodeJS.Timeout;
  private readonly options: { queue: JobQueue; handlers: JobHandlers; store: Store; logger: Logger; concurrency: number };

  constructor(options: { queue: JobQueue; handlers: JobHandlers; store: Store; logger: Logger; concurrency: number }) {
    this.options = options;
    options.queue.onEnqueued(() => this.schedule());
  }

  start(): void {
    const requeued = this.options.queue.requeueInterrupted();
    if (requeued > 0) this.options.logger.warn({ jobs: requeued }, 'requeued jobs a previous run left running');
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
    const free = this.options.concurrency - this.running.size;
    for (const job of free > 0 ? this.options.queue.claim(free) : []) {
      const run = this.run(job).finally(() => {
        this.running.delete(job.id);
        this.schedule();
      });
      this.running.set(job.id, run);
    }
    const next = this.options.queue.nextRunAt();
    const wait = next === undefined ? IDLE_POLL_MS : Math.max(10, Math.min(IDLE_POLL_MS, next - Date.now()));
    this.timer = setTimeout(() => this.pump(), wait);
    this.timer.unref();
  }

  private async run(job: ClaimedJob): Promise<void> {
    const { queue, handlers, store, logger } = this.options;
    const handler = handlers.find(job.kind);
    if (!handler) {
      queue.fail({ ...job, maxAttempts: job.attempts }, `no handler for job kind ${job.kind}`);
      logger.warn({ job: job.id, kind: job.kind }, 'no handler for job kind');
      return;
    }
    try {
      const result = await handler(job.payload, { store, jobId: job.id, attempt: job.attempts });
      queue.succeed(job.id, result);
      logger.debug({ job: job.id, kind: job.kind, attempt: job.attempts }, 'job succeeded');
    } catch (error) {
      const message = (error as Error)?.message ?? String(error);
      queue.fail(job, message.slice(0, 2000));
      logger.warn({ job: job.id, kind: job.kind, attempt: job.attempts, err: error }, 'job attempt failed');
    }
  }

  /** Stops claiming and waits for running jobs up to the bound; returns how many were still running. */
  async drain(timeoutMs: number): Promise<number> {
    this.stopped = true;
    clearTimeout(this.timer);
    if (this.running.size === 0) return 0;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.allSettled(this.running.values()), new Promise((resolve) => { timer = setTimeout(resolve, timeoutMs); })]);
    clearTimeout(timer);
    return this.running.size;
  }
}
