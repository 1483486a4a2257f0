/**
 * The credentials routes declare as their own (RouteAuth `{verify}`), checked
 * by the HTTP pipeline before the handler: a secret presented in a header (a
 * bearer token of the route's own, Telegram's secret token) and an HMAC
 * signature over the body (GitHub's and WhatsApp's `sha256=`, Slack's `v0=`
 * over a timestamped base string). Every comparison takes the same time
 * whatever the values and their lengths.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { ReceivedBody } from './body.ts';
import type { DomainError } from './errors.ts';
import type { RouteVerifier } from './registration.ts';

const digest = (value: string | Buffer): Buffer => createHash('sha256').update(value).digest();

/**
 * Whether a presented secret is the expected one, in constant time: both are
 * hashed first, so neither where they differ nor their lengths show in the
 * time taken. An empty expected secret matches nothing.
 */
export function sameSecret(given: string | Buffer | undefined, expected: string | Buffer | undefined): boolean {
  if (given === undefined || expected === undefined || expected.length === 0) return false;
  return timingSafeEqual(digest(given), digest(expected));
}

/** A request header's value, the first when it came more than once. */
export const headerOf = (req: IncomingMessage, name: string): string | undefined => {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
};

const BEARER = /^Bearer\s+(\S+)\s*$/i;

export interface SecretHeaderOptions {
  /** The headers that may carry it, read in order; `authorization` is read as `Bearer <secret>`. */
  headers: readonly string[];
  /** The secret expected now; undefined while none is configured. */
  secret: () => string | undefined;
  /** The refusal while no secret is configured (503, naming the command that sets one). */
  unconfigured: () => DomainError;
  /** The refusal of a missing (`presented` false) or wrong secret. */
  refusal: (presented: boolean) => DomainError;
  /** Asked first, for a route that locks out an address after failures: throws (429) to refuse. */
  before?: (req: IncomingMessage) => void;
  /** Told of each outcome (lockouts, audit); on a failure it may throw a refusal of its own instead (429 once locked out). */
  after?: (req: IncomingMessage, ok: boolean) => void | Promise<void>;
}

/** A secret presented in a header, checked before the body is read. */
export function secretHeader(options: SecretHeaderOptions): RouteVerifier {
  const presented = (req: IncomingMessage): string | undefined => {
    for (const name of options.headers) {
      const value = headerOf(req, name);
      if (value === undefined) continue;
      if (name !== 'authorization') return value;
      const bearer = BEARER.exec(value)?.[1];
      if (bearer !== undefined) return bearer;
    }
    return undefined;
  };
  return {
    headers: (req) => {
      options.before?.(req);
      const expected = options.secret();
      if (!expected) throw options.unconfigured();
      const given = presented(req);
      const ok = sameSecret(given, expected);
      const told = options.after?.(req, ok);
      const outcome = () => {
        if (!ok) throw options.refusal(given !== undefined);
      };
      return told ? told.then(outcome) : outcome();
    },
  };
}

export interface SignatureOptions {
  /** The header holding the signature. */
  header: string;
  /** What stands before the hex digest in it: `sha256=` (GitHub, WhatsApp), `v0=` (Slack). */
  prefix: string;
  /** The secrets it may be made with: the current one and, during a rotation, the previous one; empty while none is configured. */
  secrets: () => readonly string[];
  /** What is signed, when more than the body: Slack's `v0:<timestamp>:<body>`. Throws a refusal of its own (a stale timestamp). */
  signed?: (req: IncomingMessage, raw: Buffer) => readonly (string | Buffer)[];
  /** The refusal while no secret is configured, checked before the body is read. */
  unconfigured: (req: IncomingMessage) => DomainError;
  /** The refusal of a missing (`presented` false) or wrong signature. */
  refusal: (presented: boolean) => DomainError;
}

/**
 * An HMAC-SHA256 signature of the raw body (never of re-serialised JSON) under
 * one of the secrets, as `<prefix><hex>`: whether a secret is configured is
 * checked before the body is read, the signature once it is. Every secret is
 * tried, so the time taken does not say which one matched.
 */
export function hmacSignature(options: SignatureOptions): RouteVerifier {
  const { signed } = options;
  const form = new RegExp(`^\\s*${options.prefix.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}([0-9a-f]{64})\\s*$`, 'i');
  return {
    headers: (req) => {
      if (options.secrets().length === 0) throw options.unconfigured(req);
    },
    body: (req, body: ReceivedBody) => {
      const header = headerOf(req, options.header);
      const hex = header === undefined ? undefined : form.exec(header)?.[1];
      if (hex === undefined) throw options.refusal(header !== undefined);
      const parts = signed?.(req, body.raw);
      const given = Buffer.from(hex, 'hex');
      let ok = false;
      for (const secret of options.secrets()) {
        const hmac = createHmac('sha256', secret);
        if (parts) for (const part of parts) hmac.update(part);
        else hmac.update(body.raw);
        ok = timingSafeEqual(hmac.digest(), given) || ok;
      }
      if (!ok) throw options.refusal(true);
    },
  };
}
