import RateLimiterMemory from 'rate-limiter-flexible/lib/RateLimiterMemory.js';
import type { RateLimiterRes } from 'rate-limiter-flexible';
import { isLoopbackAddress } from '../../shared/config/exposure.ts';
import type { GatewayConfig } from '../../shared/config/types.ts';
import type { LockoutKind } from '../kernel/module.ts';

const isLimited = (error: unknown): error is RateLimiterRes =>
  typeof error === 'object' && error !== null && 'msBeforeNext' in error;

const seconds = (ms: number) => Math.max(1, Math.ceil(ms / 1000));

export type CredentialKind = LockoutKind;

/**
 * Failed authentications per client address and credential kind: by default 10
 * failures in 60 s lock the client out for 5 minutes. While locked out, nothing
 * the client sends is checked, so it cannot learn whether a credential was right.
 */
export class AuthLockout {
  private limiter: InstanceType<typeof RateLimiterMemory>;
  private settings: GatewayConfig['gateway']['auth']['rateLimit'];

  constructor(settings: GatewayConfig['gateway']['auth']['rateLimit']) {
    this.settings = settings;
    this.limiter = new RateLimiterMemory({ points: settings.maxFailures, duration: seconds(settings.windowMs) });
  }

  private exempt(address: string): boolean {
    return this.settings.exemptLoopback && isLoopbackAddress(address);
  }

  /** Milliseconds until the client may try again; 0 when it is not locked out. */
  async retryAfterMs(address: string, kind: CredentialKind): Promise<number> {
    if (this.exempt(address)) return 0;
    const state = await this.limiter.get(`${kind}|${address}`);
    return state && state.consumedPoints > this.settings.maxFailures ? Math.max(state.msBeforeNext, 1) : 0;
  }

  /** Counts a failure; returns the lockout in ms when this failure started one, else 0. */
  async fail(address: string, kind: CredentialKind): Promise<number> {
    if (this.exempt(address)) return 0;
    const key = `${kind}|${address}`;
    try {
      const counted = await this.limiter.consume(key);
      if (counted.consumedPoints < this.settings.maxFailures) return 0;
    } catch (error) {
      if (!isLimited(error)) throw error;
    }
    await this.limiter.block(key, seconds(this.settings.lockoutMs));
    return this.settings.lockoutMs;
  }

  async succeed(address: string, kind: CredentialKind): Promise<void> {
    if (!this.exempt(address)) await this.limiter.delete(`${kind}|${address}`);
  }
}

/** A request budget per key (a credential or an address) and window. */
export class RequestBudget {
  private limiter: InstanceType<typeof RateLimiterMemory>;

  constructor(points: number, windowMs: number) {
    this.limiter = new RateLimiterMemory({ points, duration: seconds(windowMs) });
  }

  /** Spends one request; returns 0, or the ms to wait when the budget is spent. */
  async spend(key: string): Promise<number> {
    try {
      await this.limiter.consume(key);
      return 0;
    } catch (error) {
      if (isLimited(error)) return Math.max(error.msBeforeNext, 1);
      throw error;
    }
  }
}
