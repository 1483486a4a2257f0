/** What the channels that take webhook deliveries (Telegram's webhook mode, Slack's Events API) share. */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { Logger } from 'pino';
import type { ERROR_CATEGORIES } from '../../shared/api/schemas.ts';
import { kindOfStatus } from '../../shared/error-kinds.ts';
import { parseJson } from '../kernel/body.ts';
import type { ChannelContext, ChannelResponse, InboundMessage } from '../kernel/channel.ts';
import { errorBodyOf } from '../kernel/errors.ts';

/** Compares a secret or signature in constant time, whatever the lengths. */
export function sameSecret(given: string, expected: string): boolean {
  return timingSafeEqual(createHash('sha256').update(given).digest(), createHash('sha256').update(expected).digest());
}

/**
 * An answer refusing a delivery, in the common error body: its category
 * follows from the status (the one the caller names is kept in the call for
 * its reader, and is always that one).
 */
export const refusal = (status: number, _category: (typeof ERROR_CATEGORIES)[number], message: string): ChannelResponse =>
  ({ status, body: errorBodyOf(kindOfStatus(status), message, status) });

/**
 * A delivery's JSON body, read within the bounds every route of the gateway
 * keeps (nested at most MAX_JSON_DEPTH deep), or the same 400 they answer.
 */
export function deliveredJson(body: Buffer): { value: unknown; refused?: undefined } | { refused: ChannelResponse } {
  try {
    return { value: parseJson(body.toString('utf8')) };
  } catch (error) {
    return { refused: refusal(400, 'bad_request', (error as Error).message) };
  }
}

/**
 * Stores what a delivery carries (when anything), and only then answers
 * 200; a failure answers 503, so that the platform delivers it again.
 */
export async function storeThenAcknowledge(context: ChannelContext, message: InboundMessage | undefined, log: Logger, what: string): Promise<ChannelResponse> {
  if (message) {
    try {
      await context.inbound(message);
    } catch (error) {
      log.warn({ err: error }, `${what} could not be stored; left for the platform to deliver again`);
      return refusal(503, 'unavailable', `The ${what.replace(/^an? /, '')} could not be stored now.`);
    }
  }
  return { status: 200, body: {} };
}
