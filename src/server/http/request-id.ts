/**
 * Request ids, on every answer (x-request-id): a well-formed one the caller
 * sent is kept, so a request can be followed through a proxy in front of the
 * gateway; else one is made from this daemon's prefix and a counter, unique
 * without drawing randomness per request.
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

/** What an id taken from a caller may be: visible, no separators a log or header could be split on, at most 128 characters. */
const GIVEN = /^[\w.:@/+=-]{1,128}$/;

export interface RequestIds {
  /** The id of a request: the caller's when well formed, else a new one. */
  of(req: IncomingMessage): string;
  /** A new id, for an answer to what is not a request (malformed HTTP). */
  made(): string;
}

export function requestIds(): RequestIds {
  const prefix = randomBytes(4).toString('hex');
  let counter = 0;
  const made = () => `${prefix}-${(++counter).toString(36)}`;
  return {
    made,
    of: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && GIVEN.test(given) ? given : made();
    },
  };
}
