/**
 * Per-credential limits of the inference API: requests per minute, tokens per
 * minute and an optional monthly token budget, answered with 429 and
 * Retry-After. Minutes are counted in memory, by this daemon; the month from
 * the log of model calls, which survives restarts.
 */
import type { GatewayConfig } from '../../shared/config/types.ts';
import { WindowCounter } from '../auth/throttle.ts';
import { DomainError, rateLimited } from '../kernel/errors.ts';

const MINUTE = 60_000;

export class InferenceLimits {
  private readonly requests = new WindowCounter(MINUTE);
  private readonly tokens = new WindowCounter(MINUTE);
  private readonly config: () => GatewayConfig;
  private readonly monthTokens: (subject: string, since: number) => Promise<number>;

  constructor(config: () => GatewayConfig, monthTokens: (subject: string, since: number) => Promise<number>) {
    this.config = config;
    this.monthTokens = monthTokens;
  }

  /** Counts a request, or refuses it (429) when the credential is over a limit. */
  async admit(subject: string, now = Date.now()): Promise<void> {
    const { monthlyTokens } = this.config().inference.limits;
    this.withinMinute(subject, now);
    if (monthlyTokens !== undefined) {
      const date = new Date(now);
      const month = Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), 1);
      if ((await this.monthTokens(subject, month)) >= monthlyTokens) {
        const next = Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + 1, 1);
        throw limited(rateLimited(next - now, `This credential has used its ${monthlyTokens} tokens for the month (inference.limits.monthlyTokens)`), 'insufficient_quota');
      }
      // Other requests may have been counted while the month was read.
      this.withinMinute(subject, now);
    }
    this.requests.hit(subject, now);
  }

  /** Refuses a request (429) when the credential is over its requests or tokens of the minute. */
  private withinMinute(subject: string, now: number): void {
    const { requestsPerMinute, tokensPerMinute } = this.config().inference.limits;
    const requests = this.requests.peek(subject, now);
    if (requests && requests.count >= requestsPerMinute) {
      throw limited(rateLimited(requests.endsAt - now, `More than ${requestsPerMinute} requests a minute for this credential (inference.limits.requestsPerMinute)`), 'rate_limit_exceeded');
    }
    const tokens = this.tokens.peek(subject, now);
    if (tokens && tokens.count >= tokensPerMinute) {
      throw limited(rateLimited(tokens.endsAt - now, `More than ${tokensPerMinute} tokens a minute for this credential (inference.limits.tokensPerMinute)`), 'rate_limit_exceeded');
    }
  }

  /** Adds what a request used to its credential's minute. */
  spent(subject: string, tokens: number, now = Date.now()): void {
    this.tokens.hit(subject, now, tokens);
  }
}

const limited = (error: DomainError, code: string) => new DomainError('rate_limited', error.message, { code, headers: error.headers, details: error.details, retryable: true });
