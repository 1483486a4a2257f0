import type { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import { type JobQueue, WEBHOOK_LANE } from '../jobs/module.ts';
import { DAEMON_NODE_FLAGS, daemonFlagsInForce } from '../../shared/run-args.ts';
import { THREAD_RELEASED } from '../kernel/threads.ts';
import { THREAD_IDLE_MS } from '../store/checkpointer.ts';
import { DomainError } from '../kernel/errors.ts';
import type { Store } from '../store/database.ts';
import { WriterTurns } from '../store/writer-turns.ts';
import type { Outcome, RawDelivery } from './deliveries.ts';
import { type FromThread, type ThreadError, type ThreadSettings, type ToThread } from './thread-protocol.ts';

export interface WebhookThreadOptions {
  store: Store;
  queue: JobQueue;
  logger: Logger;
  settings: () => Omit<ThreadSettings, 'autocheckpoint' | 'idleMs' | 'turns'>;
  /** How long the thread stays without deliveries or due jobs before it stops (30 s). */
  idleMs?: number;
}

/**
 * The most deliveries the daemon's thread gathers before it sends them to this
 * thread: with 50 concurrent senders of 2-8 KB deliveries, groups of 16-32 took
 * 6-10 % more a second than whole groups (the thread starts on a burst's first
 * deliveries while this one reads the rest); groups of 4 took fewer.
 */
export const THREAD_GROUP = 24;

/**
 * The webhook thread's young generation: twice the daemon's (DAEMON_NODE_FLAGS).
 * A backlog of jobs keeps more alive in that thread between its collections.
 * Measured with 50 senders of 2-8 KB deliveries and a round beside a
 * 50,000-job backlog after each (alternating daemons, 3 rounds each):
 * - 16 MB in both threads: backlog p99 17 ms, peak RSS 228 MB;
 * - 8 MB in both: peak RSS 192-196 MB, backlog p99 15-17 ms, 1-3 ms above 16 MB in each run;
 * - 8 MB for the daemon's thread, 16 MB for this one: backlog p99 15 ms, peak RSS 204 MB.
 */
export const THREAD_SEMI_SPACE_FLAG = '--max-semi-space-size=16';

/**
 * Starts a worker whose isolate takes THREAD_SEMI_SPACE_FLAG. V8 reads the
 * cap from its flag as an isolate starts: it is set until the worker is
 * online, then the daemon's again. A daemon started with a cap of its own
 * choosing (not DAEMON_NODE_FLAGS') is left to it.
 */
export function startWithThreadHeap(start: () => Worker, execArgv: readonly string[] = process.execArgv): Worker {
  const daemonCap = DAEMON_NODE_FLAGS.find((flag) => flag.startsWith('--max-semi-space-size='));
  if (!daemonCap || !daemonFlagsInForce('--max-semi-space-size=', execArgv)) return start();
  const v8 = process.getBuiltinModule('node:v8');
  v8.setFlagsFromString(THREAD_SEMI_SPACE_FLAG);
  let worker: Worker;
  try {
    worker = start();
  } catch (error) {
    v8.setFlagsFromString(daemonCap);
    throw error;
  }
  let restored = false;
  const restore = () => {
    if (restored) return;
    restored = true;
    v8.setFlagsFromString(daemonCap);
  };
  worker.once('online', restore);
  worker.once('error', restore);
  worker.once('exit', restore);
  return worker;
}

/** A failed write of the thread, as the daemon's thread would have thrown it (a storage fault keeps its codes). */
const rebuilt = (error: ThreadError) => Object.assign(new Error(error.message), error.code ? { code: error.code } : {}, error.errcode === undefined ? {} : { errcode: error.errcode });

/**
 * The webhook thread, seen from the daemon's thread (SQLite stores only; see
 * webhook-thread.ts). Started by the first delivery, so a daemon that never
 * receives one never pays for it. While it runs, the daemon's own job worker
 * leaves deliveries' jobs to it. Should it fail, the daemon records and runs
 * deliveries on its own thread again, as before it started: deliveries in
 * flight then answer 503 and are redelivered, and nothing is recorded twice.
 */
export class WebhookThread {
  private worker?: Worker;
  /** The thread that said it is ready (the current one, or one gone since). */
  private readyWorker?: Worker;
  /** Set once the thread failed: the daemon records deliveries itself from then on. */
  private failed = false;
  private stopping?: Promise<void>;
  private nextId = 1;
  private readonly waiting = new Map<number, { resolve: (outcomes: Outcome[]) => void; reject: (error: unknown) => void }>();
  private readonly options: WebhookThreadOptions;

  constructor(options: WebhookThreadOptions) {
    this.options = options;
    options.store.onAutocheckpoint((pages) => this.send({ type: 'autocheckpoint', pages }));
  }

  /** Whether deliveries go to the thread (false once it failed or stops: the caller records them itself). */
  get available(): boolean {
    return !this.failed && !this.stopping;
  }

  /** Whether the thread runs and has said it is ready. */
  get ready(): boolean {
    return this.readyWorker !== undefined && this.readyWorker === this.worker && this.available;
  }

  /**
   * Where a group of deliveries is recorded: in the thread once it is ready,
   * else here (`here`, on the daemon's thread), with the thread starting. A
   * thread takes 50-100 ms to start; the first deliveries (after start-up, or
   * after the thread stopped idle) are answered meanwhile instead of waiting
   * for it, and their jobs queued for whichever worker is first.
   */
  route(deliveries: RawDelivery[], here: (deliveries: RawDelivery[]) => Promise<Outcome[]>): Promise<Outcome[]> {
    if (this.ready) return this.accept(deliveries);
    if (this.available) this.start();
    return here(deliveries);
  }

  /** Parses, checks and records a group of deliveries in the thread; resolves once their transaction committed. */
  accept(deliveries: RawDelivery[]): Promise<Outcome[]> {
    this.start();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      this.send({ type: 'accept', id, deliveries });
    });
  }

  private send(message: ToThread): void {
    this.worker?.postMessage(message);
  }

  /** Starts the thread, unless it runs (or starts) already. */
  start(): void {
    if (this.worker) return;
    const { store, queue, logger } = this.options;
    // The thread's file sits beside this one: .js when built, .ts when run from the sources. worker_threads loads here.
    const { Worker } = process.getBuiltinModule('node:worker_threads');
    // The two threads take turns at the write lock: a write of the daemon's (a token, an audit event) waits for one of the
    // thread's transactions, never in SQLite's busy handler while the thread commits again and again.
    const turns = new WriterTurns('daemon');
    const worker = startWithThreadHeap(() => new Worker(new URL(`./webhook-thread.${import.meta.url.endsWith('.ts') ? 'ts' : 'js'}`, import.meta.url), {
      workerData: {
        ...this.options.settings(), autocheckpoint: store.autocheckpointPages, idleMs: this.options.idleMs ?? THREAD_IDLE_MS, turns: turns.buffer,
      } satisfies ThreadSettings,
    }));
    this.worker = worker;
    worker.unref();
    store.shareWriteLock(turns);
    worker.once('exit', () => {
      if (store.writeLockTurns === turns) store.shareWriteLock(undefined);
    });
    worker.on('message', (message: FromThread) => {
      switch (message.type) {
        case 'ready':
          // From now on the thread takes deliveries and their jobs; the daemon's worker, every other kind.
          this.readyWorker = worker;
          queue.useLane({ outside: WEBHOOK_LANE });
          logger.info('webhook deliveries and their jobs run on their own thread');
          break;
        case 'idle':
          // Nothing sent to it is unanswered: it stops, and the next delivery starts another.
          if (this.worker === worker && this.waiting.size === 0) this.retire(worker);
          break;
        case 'accepted':
          this.settle(message.id)?.resolve(message.outcomes);
          break;
        case 'failed':
          this.settle(message.id)?.reject(rebuilt(message.error));
          break;
        case 'changed':
          queue.changed();
          break;
        case 'health':
          if (message.fault) store.health.adopt(message.fault);
          else store.health.succeeded();
          break;
        case 'log':
          logger[message.level](message.fields, message.message);
          break;
        case 'stopped':
          if (message.unfinished > 0) logger.warn({ jobs: message.unfinished }, 'stopping with webhook jobs still running; they run again at the next start');
          break;
      }
    });
    const gone = (why: string) => {
      if (this.worker !== worker) return;
      this.worker = undefined;
      if (!this.stopping) {
        this.failed = true;
        logger.error({ why }, 'the webhook thread stopped; deliveries and their jobs run on the daemon thread');
      }
      // Jobs the thread was running are taken back at the next start.
      this.handBack();
      const unanswered = [...this.waiting.values()];
      this.waiting.clear();
      for (const { reject } of unanswered) {
        reject(new DomainError('unavailable', 'The delivery could not be recorded (the gateway is stopping or its webhook thread failed); redeliver it.', { retryable: true, headers: { 'retry-after': '5' } }));
      }
    };
    worker.once('error', (error) => gone(error.message));
    worker.once('exit', (code) => gone(`exited with ${code}`));
  }

  /** Lets an idle thread go: the daemon's worker runs every kind again until the next delivery starts another. */
  private retire(worker: Worker): void {
    this.worker = undefined;
    this.handBack();
    worker.postMessage({ type: 'stop', timeoutMs: 5000 } satisfies ToThread);
    // Once it is gone, the daemon's own heap gives back what the same deliveries left in it (core/memory-reducer.ts).
    worker.once('exit', () => process.getBuiltinModule('node:diagnostics_channel').channel(THREAD_RELEASED).publish({ thread: 'webhooks' }));
    this.options.logger.info('the webhook thread stopped after a while without deliveries; the next one starts it again');
  }

  /** Back to one worker for every kind: the daemon's. */
  private handBack(): void {
    this.options.queue.useLane(undefined);
    this.options.queue.wake();
  }

  private settle(id: number) {
    const entry = this.waiting.get(id);
    this.waiting.delete(id);
    return entry;
  }

  /** Lets the thread finish its running jobs (up to the deadline) and close its connection. */
  stop(deadline: number): Promise<void> {
    this.stopping ??= (async () => {
      const worker = this.worker;
      if (!worker) return;
      const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
      this.send({ type: 'stop', timeoutMs: Math.max(0, deadline - Date.now()) });
      const bound = setTimeout(() => void worker.terminate(), Math.max(0, deadline - Date.now()) + 2000);
      await exited;
      clearTimeout(bound);
    })();
    return this.stopping;
  }
}
