/**
 * What a failure of the Graph API means for a WhatsApp account: a setup to
 * finish (the account waits for an operator), the access token refused, a
 * rate limit (the whole number pauses), a temporary error (tried again), a
 * refusal for good, or the API out of reach (told with its address and
 * cause, never a path: the access token travels in headers, but a media
 * address may hold one).
 */
import type { ChannelState } from '../../../shared/channels.ts';
import { ChannelSendError } from '../../kernel/channel.ts';
import { settingPath } from '../accounts.ts';
import { describeNetworkError } from '../network-errors.ts';
import { GraphError } from './graph.ts';

/** A setup problem (a secret or the phone number id missing): the account waits for an operator. */
export class SetupProblem extends Error {}

/** Pauses of the whole number after Meta's rate limits, doubling from the first (Meta's Retry-After wins). */
const RATE_LIMIT_FIRST_PAUSE_MS = 2000;
const RATE_LIMIT_MOST_PAUSE_MS = 60_000;
/** Meta's codes for a number or an app over its rate (4: app, 80007: business account, 130429: throughput). */
const ACCOUNT_RATE_LIMITS = new Set([4, 80007, 130429]);
/** Meta's codes worth another try: temporary errors, a person's own message rate (131056), a number in maintenance. */
const RETRYABLE = new Set([1, 2, 131000, 131016, 131048, 131056, 133004]);
/** Meta's code for a message outside the 24-hour customer service window. */
export const REENGAGEMENT = 131047;

const unreachable = (error: unknown, root: URL | undefined) => describeNetworkError(error, root);

/** What the account shows, and how long it waits before it checks again, after a failure. */
export function classifyFailure(error: unknown, account: { backoff: number; longest: number; channelId: string; account: string; phoneNumberId?: string; root?: URL }): { state: ChannelState; detail: string; waitMs: number } {
  const { backoff, longest } = account;
  if (error instanceof SetupProblem) return { state: 'error', detail: error.message, waitMs: longest };
  if (error instanceof GraphError) {
    if (error.status === 401 || error.code === 190) {
      return { state: 'error', detail: `Meta refused the access token (${error.described}); set a valid one: gateway secrets set ${settingPath(account.channelId, account.account, 'accessToken')}`, waitMs: longest };
    }
    if (error.status === 404 || (error.code === 100 && error.subcode === 33)) {
      return { state: 'error', detail: `the phone number id ${account.phoneNumberId} is not one this access token can use (${error.described}); check ${settingPath(account.channelId, account.account, 'phoneNumberId')}`, waitMs: longest };
    }
    if (error.status === 429 || ACCOUNT_RATE_LIMITS.has(error.code ?? 0)) return { state: 'disconnected', detail: `Meta asked to wait (${error.described})`, waitMs: error.retryAfterMs ?? backoff };
    return { state: 'disconnected', detail: `the Graph API: ${error.described}`, waitMs: backoff };
  }
  return { state: 'disconnected', detail: `cannot reach the Graph API: ${unreachable(error, account.root)}`, waitMs: backoff };
}

/** A refused send as the outbox reads it, and what the account makes of it: out of reach, rate limited, its token refused. */
export function sendFailure(error: unknown, rateLimitsInRow: number, root: URL | undefined): { error: ChannelSendError; unreachable?: string; rateLimited?: boolean; token?: boolean } {
  if (!(error instanceof GraphError)) {
    const reason = unreachable(error, root);
    return { error: new ChannelSendError(`cannot reach WhatsApp: ${reason}`), unreachable: reason };
  }
  if (error.status === 429 || ACCOUNT_RATE_LIMITS.has(error.code ?? 0)) {
    const pause = error.retryAfterMs ?? Math.min(RATE_LIMIT_FIRST_PAUSE_MS * 2 ** rateLimitsInRow, RATE_LIMIT_MOST_PAUSE_MS);
    return { error: new ChannelSendError(`WhatsApp: rate limited (${error.described}); the account waits ${Math.round(pause / 1000)} s`, { retryAfterMs: pause }), rateLimited: true };
  }
  if (error.status === 401 || error.code === 190) return { error: new ChannelSendError(`WhatsApp refused the access token (${error.described})`), token: true };
  const permanent = error.status < 500 && !RETRYABLE.has(error.code ?? 0);
  return { error: new ChannelSendError(`WhatsApp: ${error.described}`, { permanent }) };
}
