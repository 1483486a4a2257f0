/**
 * Trying again with backoff, as each account that keeps its own connection
 * does: a second after the first failure, doubled at each one after, never
 * more than the longest wait (the channel's reconnectMaxDelayMs), a second
 * again once a connection is good; an account that stops cancels the try
 * it was waiting for.
 */

/** The first wait after a failure. */
export const FIRST_RETRY_MS = 1000;
/** Doublings counted at most: past them every wait is the longest anyway. */
const MAX_DOUBLINGS = 30;

export interface ReconnectOptions {
  /** The longest wait, read at each failure (the settings may change while the account runs). */
  maxDelayMs: () => number;
  /** The share of each wait taken off or added at random (0.2: 80 to 120 %), so accounts that failed together do not all try again together. */
  jitter?: number;
  random?: () => number;
}

export class Reconnect {
  private failures = 0;
  private timer?: NodeJS.Timeout;
  private readonly wakers = new Set<() => void>();
  private halted = false;
  private readonly options: ReconnectOptions;

  constructor(options: ReconnectOptions) {
    this.options = options;
  }

  /** The longest wait: for what only an operator can fix (a refused token), tried again now and then. */
  get longest(): number {
    return this.options.maxDelayMs();
  }

  get stopped(): boolean {
    return this.halted;
  }

  /** Whether a try is waiting to run. */
  get pending(): boolean {
    return this.timer !== undefined;
  }

  /** The wait before the next try, a failure counted. */
  next(): number {
    const wait = Math.min(FIRST_RETRY_MS * 2 ** this.failures, this.options.maxDelayMs());
    this.failures = Math.min(this.failures + 1, MAX_DOUBLINGS);
    const jitter = this.options.jitter ?? 0;
    return jitter ? wait * (1 - jitter + (this.options.random ?? Math.random)() * 2 * jitter) : wait;
  }

  /** A good connection: the next failure waits the first wait again. */
  succeeded(): void {
    this.failures = 0;
  }

  /** Runs `retry` once after `ms` (the next backoff wait unless given), in place of any try still waiting; nothing once stopped. */
  schedule(retry: () => void, ms = this.next()): void {
    if (this.halted) return;
    clearTimeout(this.timer);
    const timer = setTimeout(() => {
      if (this.timer === timer) this.timer = undefined;
      retry();
    }, ms);
    timer.unref();
    this.timer = timer;
  }

  /** Resolves after `ms` (the next backoff wait unless given), or as soon as the account stops. */
  wait(ms = this.next()): Promise<void> {
    if (this.halted) return Promise.resolve();
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        this.wakers.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      timer.unref();
      this.wakers.add(wake);
    });
  }

  /** Cancels the try waiting and ends every wait; nothing is tried after. */
  stop(): void {
    this.halted = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    for (const wake of [...this.wakers]) wake();
  }
}
