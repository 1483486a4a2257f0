/**
 * Per-credential limits of the inference API: requests per minute, tokens per
 * minute and an optional monthly token budget, answered with 429 and
 * Retry-After. Minutes are counted in memory, by this daemon; the month from
 * the log of model calls, which survives restarts.
 */
import type { GatewayConfig } from '../../shared/config/types.ts';
import { DomainError, rateLimited } from '../kernel/errors.ts';

interface Window { start: number; requests: number; tokens: number }

const MINUTE = 60_000;

export class InferenceLimits {
  private readonly windows = new Map<string, Window>();
  private readonly config: () => GatewayConfig;
  private readonly monthTokens: (subject: string, since: number) => number;

  constructor(config: () => GatewayConfig, monthTokens: (subject: string, since: number) => number) {
    this.config = config;
    this.monthTokens = monthTokens;
  }

  private window(subject: string, now: number): Window {
    let window = this.windows.get(subject);
    if (!window || now - window.start >= MINUTE) {
      window = { start: now, requests: 0, tokens: 0 };
      this.windows.set(subject, window);
      if (this.windows.size > 10_000) {
        for (const [key, old] of this.windows) if (now - old.start >= MINUTE) this.windows.delete(key);
      }
    }
    return window;
  }

  /** Counts a request, or refuses it (429) when the credential is over a limit. */
  admit(subject: string, now = Date.now()): void {
    const { requestsPerMinute, tokensPerMinute, monthlyTokens } = this.config().inference.limits;
    const window = this.window(subject, now);
    const wait = window.start + MINUTE - now;
    if (window.requests >= requestsPerMinute) {
      throw limited(rateLimited(wait, `More than ${requestsPerMinute} requests a minute for this credential (inference.limits.requestsPerMinute)`), 'rate_limit_exceeded');
    }
    if (window.tokens >= tokensPerMinute) {
      throw limited(rateLimited(wait, `More than ${tokensPerMinute} tokens a minute for this credential (inference.limits.tokensPerMinute)`), 'rate_limit_exceeded');
    }
    if (monthlyTokens !== undefined) {
      const date = new Date(now);
      const month = Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), 1);
      if (this.monthTokens(subject, month) >= monthlyTokens) {
        const next = Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + 1, 1);
        throw limited(rateLimited(next - now, `This credential has used its ${monthlyTokens} tokens for the month (inference.limits.monthlyTokens)`), 'insufficient_quota');
      }
    }
    window.requests++;
  }

  /** Adds what a request used to its credential's minute. */
  spent(subject: string, tokens: number, now = Date.now()): void {
    this.window(subject, now).tokens += tokens;
  }
}

const limited = (error: DomainError, code: string) => new DomainError('rate_limited', error.message, { code, headers: error.headers, details: error.details, retryable: true });
