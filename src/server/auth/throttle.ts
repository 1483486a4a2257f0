import { isLoopbackAddress } from '../../shared/config/exposure.ts';
import type { GatewayConfig } from '../../shared/config/types.ts';
import type { LockoutKind } from '../kernel/module.ts';

interface Window {
  count: number;
  /** When the window ends and its count is forgotten (ms since the epoch). */
  endsAt: number;
}

/**
 * Counts per key in fixed windows that start at a key's first count. Every
 * call is synchronous (a request's budget costs no promise and no timer per
 * key), and windows that ended are swept once a window, so memory follows the
 * keys seen lately.
 */
export class WindowCounter {
  private readonly windows = new Map<string, Window>();
  private nextSweep = 0;
  readonly windowMs: number;

  constructor(windowMs: number) {
    this.windowMs = Math.max(1, windowMs);
  }

  /** Counts for the key (one, unless told how many); the key's window after counting. */
  hit(key: string, now = Date.now(), amount = 1): Window {
    this.sweep(now);
    let window = this.windows.get(key);
    if (window === undefined || window.endsAt <= now) {
      window = { count: 0, endsAt: now + this.windowMs };
      this.windows.set(key, window);
    }
    window.count += amount;
    return window;
  }

  /** The key's window while it lasts. */
  peek(key: string, now = Date.now()): Window | undefined {
    const window = this.windows.get(key);
    return window !== undefined && window.endsAt > now ? window : undefined;
  }

  /** Holds the key at a count for a while, whatever its window was. */
  hold(key: string, count: number, ms: number, now = Date.now()): void {
    this.windows.set(key, { count, endsAt: now + ms });
  }

  forget(key: string): void {
    this.windows.delete(key);
  }

  get size(): number {
    return this.windows.size;
  }

  private sweep(now: number): void {
    if (now < this.nextSweep) return;
    this.nextSweep = now + this.windowMs;
    for (const [key, window] of this.windows) {
      if (window.endsAt <= now) this.windows.delete(key);
    }
  }
}

export type CredentialKind = LockoutKind;

/**
 * Failed authentications per client address and credential kind: by default 10
 * failures in 60 s lock the client out for 5 minutes. While locked out, nothing
 * the client sends is checked, so it cannot learn whether a credential was right.
 */
export class AuthLockout {
  private readonly failures: WindowCounter;
  private readonly settings: GatewayConfig['gateway']['auth']['rateLimit'];

  constructor(settings: GatewayConfig['gateway']['auth']['rateLimit']) {
    this.settings = settings;
    this.failures = new WindowCounter(settings.windowMs);
  }

  private exempt(address: string): boolean {
    return this.settings.exemptLoopback && isLoopbackAddress(address);
  }

  /** Milliseconds until the client may try again; 0 when it is not locked out. */
  retryAfterMs(address: string, kind: CredentialKind): number {
    if (this.exempt(address)) return 0;
    const now = Date.now();
    const window = this.failures.peek(`${kind}|${address}`, now);
    return window && window.count > this.settings.maxFailures ? Math.max(window.endsAt - now, 1) : 0;
  }

  /** Counts a failure; returns the lockout in ms when this failure started one, else 0. */
  fail(address: string, kind: CredentialKind): number {
    if (this.exempt(address)) return 0;
    const key = `${kind}|${address}`;
    if (this.failures.hit(key).count < this.settings.maxFailures) return 0;
    this.failures.hold(key, this.settings.maxFailures + 1, this.settings.lockoutMs);
    return this.settings.lockoutMs;
  }

  succeed(address: string, kind: CredentialKind): void {
    if (!this.exempt(address)) this.failures.forget(`${kind}|${address}`);
  }
}

/** A request budget per key (a credential or an address) and window. */
export class RequestBudget {
  private readonly spent: WindowCounter;
  private readonly points: number;

  constructor(points: number, windowMs: number) {
    this.points = points;
    this.spent = new WindowCounter(windowMs);
  }

  /** Spends one request; returns 0, or the ms to wait when the budget is spent. */
  spend(key: string): number {
    const now = Date.now();
    const window = this.spent.hit(key, now);
    return window.count > this.points ? Math.max(window.endsAt - now, 1) : 0;
  }
}
