import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { GatewayConfig } from '../../shared/config/types.ts';
import { DomainError, rateLimited } from '../kernel/errors.ts';
import type { BearerVerifier, Principal } from '../kernel/module.ts';
import type { GatewayCredential } from './gateway-credential.ts';
import type { AuthLockout } from './throttle.ts';
import { addressMatcher } from './trusted-proxies.ts';

export type { BearerVerifier, Principal };

const CREDENTIAL_PARAMS = new Set(['token', 'access_token', 'auth', 'authorization', 'password', 'passwd', 'api_key', 'apikey', 'key', 'secret', 'hooks_token']);

/**
 * Credentials never travel in a query string: it ends up in logs and browser
 * history. Names are read as a server framework would read them: decoded
 * (`%74oken`), with array and object suffixes (`token[]`, `token[a]`) taken off.
 */
export const queryCarriesCredential = (url: string | undefined): boolean => {
  const start = url?.indexOf('?') ?? -1;
  if (start === -1) return false;
  for (const name of new URLSearchParams(url!.slice(start + 1)).keys()) {
    if (CREDENTIAL_PARAMS.has(name.replace(/\[.*$/, '').trim().toLowerCase())) return true;
  }
  return false;
};

const FORWARDING = ['forwarded', 'x-forwarded-for', 'x-real-ip', 'x-forwarded-host', 'x-forwarded-proto'];

const unauthorized = (message: string, challenge: string) => new DomainError('unauthorized', message, { headers: { 'www-authenticate': challenge } });

/** Refuses a credential in the query string (400). */
export const queryCredentialRefused = () =>
  new DomainError('invalid', 'Credentials are never accepted in the query string; send them as "Authorization: Bearer <credential>".');

export const bearerOf = (req: IncomingMessage): string | undefined => {
  const header = req.headers.authorization;
  if (!header) return undefined;
  // The rest of the header, so a password mode passphrase may hold spaces.
  const match = /^Bearer\s+(\S.*?)\s*$/i.exec(header);
  if (!match) throw unauthorized('Use the Authorization header as "Bearer <credential>".', 'Bearer');
  return match[1];
};

/** How long a credential that was valid keeps its own request budget without being seen valid again. */
const VALID_REMEMBERED_MS = 10 * 60_000;

/** The budget key of a connection's address, made once per connection: a keep-alive client's every request would make it again. */
const addressKeys = new WeakMap<object, string>();
const addressKey = (req: IncomingMessage): string => {
  let key = addressKeys.get(req.socket);
  if (key === undefined) {
    const address = req.socket.remoteAddress;
    key = `addr:${address ?? 'unknown'}`;
    if (address !== undefined) addressKeys.set(req.socket, key);
  }
  return key;
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
}

/** Who a private-overlay connection is, when the overlay vouches for it; undefined otherwise. */
export type OverlayIdentity = (req: IncomingMessage) => Promise<string | undefined>;

/** Authenticates HTTP requests under the configured auth mode. Throws a DomainError 400/401/403/429. */
export class HttpAuthenticator {
  private readonly deps: HttpAuthDeps;
  private readonly trusted: (address: string) => boolean;
  /** Further bearer credentials (product tokens, JWTs, the service key), tried after the gateway's own. */
  private readonly verifiers: BearerVerifier[] = [];
  private overlayIdentity?: OverlayIdentity;
  /**
   * Fingerprints of Authorization headers that carried a valid credential lately,
   * with when that stops counting: only these get a request budget of their own.
   */
  private readonly recentlyValid = new Map<string, number>();

  constructor(deps: HttpAuthDeps) {
    this.deps = deps;
    this.trusted = addressMatcher(deps.config().gateway.trustedProxies);
  }

  addVerifier(verifier: BearerVerifier): void {
    this.verifiers.push(verifier);
  }

  /** The overlay's word on who a request is (gateway.auth.allowOverlay). */
  setOverlayIdentity(identity: OverlayIdentity): void {
    this.overlayIdentity = identity;
  }

  /**
   * Whose request budget a request spends, decided before it is authenticated:
   * a credential that was valid lately has its own; anything else (no
   * credential, a wrong one, a new junk value on every request) spends its
   * address's, so changing the header buys nothing and holds no memory.
   */
  budgetKey(req: IncomingMessage): string {
    const header = req.headers.authorization;
    if (header) {
      const print = fingerprint(header);
      const until = this.recentlyValid.get(print);
      if (until !== undefined && until > Date.now()) return `cred:${print}`;
    }
    return addressKey(req);
  }

  private rememberValid(req: IncomingMessage): void {
    const header = req.headers.authorization;
    if (!header) return;
    const print = fingerprint(header);
    this.recentlyValid.delete(print);
    // Bounded by the credentials in use; the oldest is forgotten first (it then spends its address's budget until it is seen again).
    if (this.recentlyValid.size >= 10_000) this.recentlyValid.delete(this.recentlyValid.keys().next().value!);
    this.recentlyValid.set(print, Date.now() + VALID_REMEMBERED_MS);
  }

  async authenticate(req: IncomingMessage): Promise<Principal> {
    if (queryCarriesCredential(req.url)) throw queryCredentialRefused();
    const { auth } = this.deps.config().gateway;
    const address = req.socket.remoteAddress ?? 'unknown';
    if (auth.mode === 'none') return { kind: 'anonymous', subject: 'anonymous', scopes: 'all' };
    const overlay = auth.allowOverlay && this.overlayIdentity ? await this.overlayIdentity(req) : undefined;
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
      throw new DomainError('unauthorized', `Forwarding headers from ${address}, which is not in gateway.trustedProxies, are refused.`);
    }
    const user = req.headers[auth.trustedProxy.userHeader];
    const missing = auth.trustedProxy.requiredHeaders.filter((name) => req.headers[name.toLowerCase()] === undefined);
    if (typeof user !== 'string' || user.length === 0 || missing.length > 0) return undefined;
    if (auth.trustedProxy.allowUsers.length > 0 && !auth.trustedProxy.allowUsers.includes(user)) {
      this.deps.audit('auth.failure', { address, detail: { kind: 'proxy-user', reason: 'user not allowed', user } });
      throw new DomainError('forbidden', `User ${JSON.stringify(user)} is not in gateway.auth.trustedProxy.allowUsers.`);
    }
    return user;
  }

  private async bearer(req: IncomingMessage, address: string): Promise<Principal> {
    const retryAfter = this.deps.lockout.retryAfterMs(address, 'bearer');
    if (retryAfter > 0) throw rateLimited(retryAfter, 'Too many failed attempts');
    const value = bearerOf(req);
    if (value === undefined) throw unauthorized('This route needs a credential: "Authorization: Bearer <credential>".', 'Bearer');
    if (this.deps.credential.verifyBearer(value)) {
      this.deps.lockout.succeed(address, 'bearer');
      this.rememberValid(req);
      return { kind: 'gateway', subject: 'gateway', scopes: 'all' };
    }
    let refusal = 'The credential is not valid.';
    for (const verify of this.verifiers) {
      const outcome = await verify(value);
      if (typeof outcome === 'string') {
        refusal = outcome;
        break;
      }
      if (outcome) {
        this.deps.lockout.succeed(address, 'bearer');
        this.rememberValid(req);
        return outcome;
      }
    }
    const lockedFor = this.deps.lockout.fail(address, 'bearer');
    this.deps.audit(lockedFor ? 'auth.lockout' : 'auth.failure', { address, detail: { kind: 'bearer', path: (req.url ?? '').split('?')[0], ...(lockedFor ? { lockoutMs: lockedFor } : {}) } });
    throw unauthorized(refusal, 'Bearer error="invalid_token"');
  }
}

/** Whether a principal holds a scope; a token with admin holds every scope. */
export const holds = (principal: Principal, scope: string): boolean =>
  principal.scopes === 'all' || principal.scopes.has(scope) || principal.scopes.has('admin');
