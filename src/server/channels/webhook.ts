/** What the channels that take webhook deliveries (Telegram's webhook mode, Slack's Events API, WhatsApp) share. */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { Logger } from 'pino';
import type { ERROR_CATEGORIES } from '../../shared/api/schemas.ts';
import { kindOfStatus } from '../../shared/error-kinds.ts';
import { parseJson } from '../kernel/body.ts';
import type { ChannelContext, ChannelRequest, ChannelResponse, InboundMessage } from '../kernel/channel.ts';
import { DomainError, errorBodyOf } from '../kernel/errors.ts';

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
 * A secret a platform presents in a header with each request (Telegram's
 * X-Telegram-Bot-Api-Secret-Token), compared in constant time: 503 (`unready`
 * says why) while the account takes no requests (`expected` undefined), 401
 * when it is missing or wrong.
 */
export function secretTokenRefusal(request: Pick<ChannelRequest, 'headers'>, header: string, expected: string | undefined, unready: string): ChannelResponse | undefined {
  if (expected === undefined) return refusal(503, 'unavailable', unready);
  const given = request.headers[header.toLowerCase()];
  return typeof given === 'string' && sameSecret(given, expected) ? undefined : refusal(401, 'unauthorized', `The ${header} header is missing or wrong.`);
}

/** A refusal a channel answered (verify), as the error the HTTP pipeline answers with the same status and body. */
export function refusalError(refused: ChannelResponse): DomainError {
  const message = (refused.body as { message?: unknown } | undefined)?.message;
  return new DomainError(kindOfStatus(refused.status), typeof message === 'string' ? message : 'The request was refused.');
}

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
