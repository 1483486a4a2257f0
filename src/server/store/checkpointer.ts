import { statSync } from 'node:fs';
import type { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import type { Store } from './database.ts';

/** How long a thread of the daemon (webhooks, checkpoints) stays without work before it stops, giving its memory back. */
export const THREAD_IDLE_MS = 30_000;

/** The WAL size at which checkpoints move to their own thread. */
const START_AT_BYTES = 8 * 1024 * 1024;
const WATCH_INTERVAL_MS = 1000;
const CHECKPOINT_INTERVAL_MS = 200;
/** While the thread runs, the daemon's own connection checkpoints only past this many pages: a safety net. */
const FALLBACK_AUTOCHECKPOINT_PAGES = 65_536;

/**
 * Checkpoints off the daemon's thread. Inline checkpoints (SQLite's
 * autocheckpoint) copy the WAL into the database during a commit, on the
 * thread that answers requests; under write load that is a sixth of its time.
 * Once the WAL grows past 8 MB (write load, not an idle daemon), a worker
 * thread with its own connection takes over with passive checkpoints, which
 * never block the writer.
 *
 * After 30 s without writes, the thread empties the WAL file (under write load
 * it is reused at up to 256 MB, and would stay that large on disk) and stops,
 * giving its memory back; inline checkpoints of a few pages take over again,
 * and the next write load starts another thread.
 */
export interface CheckpointerOptions {
  path: string;
  synchronous: 'normal' | 'full';
  logger: Logger;
  /** How long the thread stays without writes before it stops (THREAD_IDLE_MS). */
  idleMs?: number;
  /** How often the thread checkpoints (200 ms). */
  intervalMs?: number;
}

export class Checkpointer {
  private worker?: Worker;
  /** A thread let go after a while without writes, until it has closed its connection. */
  private stopping?: Promise<void>;
  private watch?: NodeJS.Timeout;
  private readonly store: Store;
  private readonly options: CheckpointerOptions;

  constructor(store: Store, options: CheckpointerOptions) {
    this.store = store;
    this.options = options;
  }

  /** Whether checkpoints run on their own thread now. */
  get running(): boolean {
    return this.worker !== undefined;
  }

  /** Watches the WAL and starts the thread when it is needed. */
  watchWal(): void {
    clearInterval(this.watch);
    this.watch = setInterval(() => {
      let size = 0;
      try {
        size = statSync(`${this.options.path}-wal`).size;
      } catch {
        return;
      }
      if (size >= START_AT_BYTES) this.start();
    }, WATCH_INTERVAL_MS);
    this.watch.unref();
  }

  start(): void {
    clearInterval(this.watch);
    if (this.worker) return;
    // The worker's file sits beside this one: .js when built, .ts when run from the sources.
    // worker_threads loads here, once write load calls for the thread, not at every start.
    const { Worker } = process.getBuiltinModule('node:worker_threads');
    const worker = new Worker(new URL(`./checkpoint-worker.${import.meta.url.endsWith('.ts') ? 'ts' : 'js'}`, import.meta.url), {
      workerData: {
        path: this.options.path, synchronous: this.options.synchronous,
        intervalMs: this.options.intervalMs ?? CHECKPOINT_INTERVAL_MS, idleMs: this.options.idleMs ?? THREAD_IDLE_MS,
      },
    });
    this.worker = worker;
    worker.unref();
    this.store.setAutocheckpoint(FALLBACK_AUTOCHECKPOINT_PAGES);
    worker.on('message', (message: { type: string; message?: string }) => {
      if (message.type === 'error') this.options.logger.warn({ error: message.message }, 'background checkpoint failed');
      if (message.type === 'idle' && this.worker === worker) this.retire(worker);
    });
    const fallBack = (why: string) => {
      if (this.worker !== worker) return;
      this.worker = undefined;
      this.store.setAutocheckpoint();
      this.options.logger.warn({ why }, 'checkpoints are back on the daemon thread');
    };
    worker.once('error', (error) => fallBack(error.message));
    worker.once('exit', (code) => fallBack(`the checkpoint thread exited (${code})`));
    this.options.logger.info('checkpoints moved to their own thread');
  }

  /** Lets an idle thread go (it emptied the WAL file): inline checkpoints again, and the WAL watched for the next load. */
  private retire(worker: Worker): void {
    this.worker = undefined;
    this.store.setAutocheckpoint();
    this.stopping = this.stopThread(worker);
    this.options.logger.info('checkpoints are back on the daemon thread after a while without writes; the WAL file was emptied');
    this.watchWal();
  }

  /** Stops the thread after a last checkpoint (and waits for one that was stopping already); the store closes after this. */
  async stop(): Promise<void> {
    clearInterval(this.watch);
    const worker = this.worker;
    this.worker = undefined;
    await Promise.all([this.stopping, worker && this.stopThread(worker)]);
  }

  private async stopThread(worker: Worker): Promise<void> {
    const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
    worker.postMessage({ type: 'stop' });
    const bound = setTimeout(() => void worker.terminate(), 5000);
    await exited;
    clearTimeout(bound);
  }
}
