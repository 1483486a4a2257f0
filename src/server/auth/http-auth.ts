import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { GatewayConfig } from '../../shared/config/types.ts';
import { HttpError } from '../http/error-body.ts';
import type { GatewayCredential } from './gateway-credential.ts';
import type { AuthLockout } from './throttle.ts';
import { addressMatcher } from './trusted-proxies.ts';

/** Who made an HTTP request, once authenticated. */
export interface Principal {
  kind: 'gateway' | 'proxy-user' | 'overlay' | 'anonymous' | 'token' | 'jwt' | 'service';
  /** A stable name for logs and ownership: never a secret. */
  subject: string;
  /** Scopes held; the gateway's own credential holds every scope. */
  scopes: ReadonlySet<string> | 'all';
}

/**
 * Another kind of bearer credential (product tokens, JWTs, the service key):
 * a principal, undefined when the value is not one of its kind, or a string
 * saying why a value of its kind is refused (expired, revoked).
 */
export type BearerVerifier = (value: string) => Promise<Principal | string | undefined> | Principal | string | undefined;

const CREDENTIAL_PARAMS = /[?&](?:token|access_token|auth|authorization|password|passwd|api_key|apikey|key|secret|hooks_token)=/i;

/** Credentials never travel in a query string: it ends up in logs and browser history. */
export const queryCarriesCredential = (url: string | undefined): boolean =>
  Boolean(url && url.includes('?') && CREDENTIAL_PARAMS.test(url.slice(url.indexOf('?'))));

const FORWARDING = ['forwarded', 'x-forwarded-for', 'x-real-ip', 'x-forwarded-host', 'x-forwarded-proto'];

export const bearerOf = (req: IncomingMessage): string | undefined => {
  const header = req.headers.authorization;
  if (!header) return undefined;
  // The rest of the header, so a password mode passphrase may hold spaces.
  const match = /^Bearer\s+(\S.*?)\s*$/i.exec(header);
  if (!match) throw new HttpError(401, 'Use the Authorization header as "Bearer <credential>".', { 'www-authenticate': 'Bearer' });
  return match[1];
};

/** A short fingerprint of a credential, for rate-limit keys and logs. */
const fingerprints = new Map<string, string>();
export const fingerprint = (value: string): string => {
  let print = fingerprints.get(value);
  if (print === undefined) {
    print = createHash('sha256').update(value).digest('base64url').slice(0, 16);
    // Bounded: a flood of distinct values only resets the memo.
    if (fingerprints.size >= 1024) fingerprints.clear();
    fingerprints.set(value, print);
  }
  return print;
};

export interface HttpAuthDeps {
  config: () => GatewayConfig;
  credential: GatewayCredential;
  lockout: AuthLockout;
  audit: (kind: string, fields: { subject?: string; address?: string; detail?: Record<string, unknown> }) => void;
  /** Identity of a private-overlay connection, when the overlay vouches for one (seam for the overlay). */
  overlayIdentity?: (req: IncomingMessage) => string | undefined;
  /** Further bearer credentials, tried after the gateway's own. */
  verifiers?: BearerVerifier[];
}

/** Authenticates HTTP requests under the configured auth mode. Throws HttpError 400/401/403/429. */
export class HttpAuthenticator {
  private readonly deps: HttpAuthDeps;
  private readonly trusted: (address: string) => boolean;

  constructor(deps: HttpAuthDeps) {
    this.deps = deps;
    this.trusted = addressMatcher(deps.config().gateway.trustedProxies);
  }

  async authenticate(req: IncomingMessage): Promise<Principal> {
    if (queryCarriesCredential(req.url)) {
      throw new HttpError(400, 'Credentials are never accepted in the query string; send them as "Authorization: Bearer <credential>".');
    }
    const { auth } = this.deps.config().gateway;
    const address = req.socket.remoteAddress ?? 'unknown';
    if (auth.mode === 'none') return { kind: 'anonymous', subject: 'anonymous', scopes: 'all' };
    const overlay = auth.allowOverlay ? this.deps.overlayIdentity?.(req) : undefined;
    if (overlay) return { kind: 'overlay', subject: overlay, scopes: 'all' };

    if (auth.mode === 'trusted-proxy') {
      const user = this.proxyUser(req);
      if (user) return { kind: 'proxy-user', subject: `proxy:${user}`, scopes: 'all' };
    }
    return this.bearer(req, address);
  }

  /**
   * The user a trusted proxy vouches for, in trusted-proxy mode: the request
   * comes from gateway.trustedProxies with the user header and every required
   * header. Forwarding headers from anyone else are refused (401), and a user
   * outside allowUsers too (403). Undefined when no proxy speaks for the request.
   */
  proxyUser(req: IncomingMessage): string | undefined {
    const { auth } = this.deps.config().gateway;
    if (auth.mode !== 'trusted-proxy') return undefined;
    const address = req.socket.remoteAddress ?? 'unknown';
    const proxied = FORWARDING.some((name) => req.headers[name] !== undefined) || req.headers[auth.trustedProxy.userHeader] !== undefined;
    if (!this.trusted(address)) {
      if (!proxied) return undefined;
      this.deps.audit('auth.failure', { address, detail: { kind: 'proxy', reason: 'forwarding headers from an untrusted address' } });
      throw new HttpError(401, `Forwarding headers from ${address}, which is not in gateway.trustedProxies, are refused.`);
    }
    const user = req.headers[auth.trustedProxy.userHeader];
    const missing = auth.trustedProxy.requiredHeaders.filter((name) => req.headers[name.toLowerCase()] === undefined);
    if (typeof user !== 'string' || user.length === 0 || missing.length > 0) return undefined;
    if (auth.trustedProxy.allowUsers.length > 0 && !auth.trustedProxy.allowUsers.includes(user)) {
      this.deps.audit('auth.failure', { address, detail: { kind: 'proxy-user', reason: 'user not allowed', user } });
      throw new HttpError(403, `User ${JSON.stringify(user)} is not in gateway.auth.trustedProxy.allowUsers.`);
    }
    return user;
  }

  private async bearer(req: IncomingMessage, address: string): Promise<Principal> {
    const retryAfter = await this.deps.lockout.retryAfterMs(address, 'bearer');
    if (retryAfter > 0) throw tooMany(retryAfter);
    const value = bearerOf(req);
    if (value === undefined) throw new HttpError(401, 'This route needs a credential: "Authorization: Bearer <credential>".', { 'www-authenticate': 'Bearer' });
    if (this.deps.credential.verifyBearer(value)) {
      await this.deps.lockout.succeed(address, 'bearer');
      return { kind: 'gateway', subject: 'gateway', scopes: 'all' };
    }
    let refusal = 'The credential is not valid.';
    for (const verify of this.deps.verifiers ?? []) {
      const outcome = await verify(value);
      if (typeof outcome === 'string') {
        refusal = outcome;
        break;
      }
      if (outcome) {
        await this.deps.lockout.succeed(address, 'bearer');
        return outcome;
      }
    }
    const lockedFor = await this.deps.lockout.fail(address, 'bearer');
    this.deps.audit(lockedFor ? 'auth.lockout' : 'auth.failure', { address, detail: { kind: 'bearer', path: (req.url ?? '').split('?')[0], ...(lockedFor ? { lockoutMs: lockedFor } : {}) } });
    throw new HttpError(401, refusal, { 'www-authenticate': 'Bearer error="invalid_token"' });
  }
}

export const tooMany = (retryAfterMs: number, what = 'Too many failed attempts'): HttpError =>
  new HttpError(429, `${what}; try again in ${Math.ceil(retryAfterMs / 1000)} s.`, { 'retry-after': String(Math.ceil(retryAfterMs / 1000)) });

/** Whether a principal holds a scope; a token with admin holds every scope. */
export const holds = (principal: Principal, scope: string): boolean =>
  principal.scopes === 'all' || principal.scopes.has(scope) || principal.scopes.has('admin');
