import { statSync } from 'node:fs';
import type { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import type { Store } from './database.ts';

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
 */
export class Checkpointer {
  private worker?: Worker;
  private watch?: NodeJS.Timeout;
  private readonly store: Store;
  private readonly options: { path: string; synchronous: 'normal' | 'full'; logger: Logger };

  constructor(store: Store, options: { path: string; synchronous: 'normal' | 'full'; logger: Logger }) {
    this.store = store;
    this.options = options;
  }

  /** Watches the WAL and starts the thread when it is needed. */
  watchWal(): void {
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
      workerData: { path: this.options.path, synchronous: this.options.synchronous, intervalMs: CHECKPOINT_INTERVAL_MS },
    });
    this.worker = worker;
    worker.unref();
    this.store.setAutocheckpoint(FALLBACK_AUTOCHECKPOINT_PAGES);
    worker.on('message', (message: { type: string; message?: string }) => {
      if (message.type === 'error') this.options.logger.warn({ error: message.message }, 'background checkpoint failed');
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

  /** Stops the thread after a last checkpoint; the store closes after this. */
  async stop(): Promise<void> {
    clearInterval(this.watch);
    const worker = this.worker;
    if (!worker) return;
    this.worker = undefined;
    const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
    worker.postMessage({ type: 'stop' });
    const bound = setTimeout(() => void worker.terminate(), 5000);
    await exited;
    clearTimeout(bound);
  }
}
