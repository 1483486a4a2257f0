/**
 * The hooks ingress's credential: a token of its own, as a bearer or in
 * x-gateway-token, declared as the route's verifier so the pipeline checks it
 * before a request's body is read; failures count towards the address's
 * lockout and are audited.
 */
import { DomainError, rateLimited } from '../kernel/errors.ts';
import type { AuthLockoutView, RouteVerifier } from '../kernel/module.ts';
import { secretHeader } from '../kernel/verifiers.ts';
import type { Store } from '../store/database.ts';

export interface HooksTokenDeps {
  /** The hooks token; undefined when none is set. */
  token: () => string | undefined;
  lockout: AuthLockoutView;
  store: Store;
}

const addressOf = (req: { socket: { remoteAddress?: string } }) => req.socket.remoteAddress ?? 'unknown';

/** Admits a request that presents the hooks token: 429 once locked out, 503 while none is set, 401 for a missing or wrong one. */
export function hooksToken({ token, lockout, store }: HooksTokenDeps): RouteVerifier {
  return secretHeader({
    headers: ['authorization', 'x-gateway-token'],
    secret: token,
    before: (req) => {
      const wait = lockout.retryAfterMs(addressOf(req), 'hooks');
      if (wait > 0) throw rateLimited(wait, 'Too many failed attempts');
    },
    after: (req, ok) => {
      const address = addressOf(req);
      if (ok) return lockout.succeed(address, 'hooks');
      const lockedFor = lockout.fail(address, 'hooks');
      return store.audit(lockedFor ? 'auth.lockout' : 'auth.failure', { address, detail: { kind: 'hooks', ...(lockedFor ? { lockoutMs: lockedFor } : {}) } }).then(() => {
        if (lockedFor) throw rateLimited(lockedFor, 'Too many failed attempts');
      });
    },
    unconfigured: () => new DomainError('unavailable', 'No hooks token is configured: gateway hooks token set'),
    refusal: (presented) => new DomainError('unauthorized', presented
      ? 'The hooks token is not valid.'
      : 'Hooks need the hooks token: "Authorization: Bearer <token>" or "x-gateway-token: <token>".', { headers: { 'www-authenticate': 'Bearer' } }),
  });
}
