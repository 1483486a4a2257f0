/**
 * The hooks ingress's credential: a token of its own, as a bearer or in
 * x-gateway-token, checked before a request's body is read; failures count
 * towards the address's lockout and are audited.
 */
import type { IncomingMessage } from 'node:http';
import { secretEquals } from '../auth/gateway-credential.ts';
import { DomainError, rateLimited } from '../kernel/errors.ts';
import type { AuthLockoutView } from '../kernel/module.ts';
import type { Store } from '../store/database.ts';

export interface HooksTokenDeps {
  /** The hooks token; undefined when none is set. */
  token: () => string | undefined;
  lockout: AuthLockoutView;
  store: Store;
}

const header = (req: IncomingMessage, name: string): string | undefined => {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
};

/** Admits a request that presents the hooks token: 503 while none is set, 401 for a missing or wrong one, 429 once locked out. */
export function hooksTokenCheck({ token, lockout, store }: HooksTokenDeps): (req: IncomingMessage) => Promise<void> {
  return async (req) => {
    const address = req.socket.remoteAddress ?? 'unknown';
    const wait = lockout.retryAfterMs(address, 'hooks');
    if (wait > 0) throw rateLimited(wait, 'Too many failed attempts');
    const expected = token();
    if (!expected) throw new DomainError('unavailable', 'No hooks token is configured: gateway hooks token set');
    const bearer = /^Bearer\s+(\S+)\s*$/i.exec(header(req, 'authorization') ?? '')?.[1];
    const presented = bearer ?? header(req, 'x-gateway-token');
    if (secretEquals(presented, expected)) {
      lockout.succeed(address, 'hooks');
      return;
    }
    const lockedFor = lockout.fail(address, 'hooks');
    await store.audit(lockedFor ? 'auth.lockout' : 'auth.failure', { address, detail: { kind: 'hooks', ...(lockedFor ? { lockoutMs: lockedFor } : {}) } });
    if (lockedFor) throw rateLimited(lockedFor, 'Too many failed attempts');
    throw new DomainError('unauthorized', presented === undefined
      ? 'Hooks need the hooks token: "Authorization: Bearer <token>" or "x-gateway-token: <token>".'
      : 'The hooks token is not valid.', { headers: { 'www-authenticate': 'Bearer' } });
  };
}
