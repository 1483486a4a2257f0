import type { Context, Next } from 'koa';
import { isLoopbackAddress } from '../../shared/config/exposure.ts';
import type { RequestBudget } from '../auth/throttle.ts';
import { fingerprint, holds, queryCarriesCredential, type HttpAuthenticator } from '../auth/http-auth.ts';
import { HttpError } from './error-body.ts';

/** Refuses any request that carries a credential in its query string (400). */
export async function queryCredentialLayer(ctx: Context, next: Next): Promise<void> {
  if (queryCarriesCredential(ctx.url)) {
    throw new HttpError(400, 'Credentials are never accepted in the query string; send them as "Authorization: Bearer <credential>".');
  }
  await next();
}

/** A request budget per credential, or per address for anonymous callers (429 with Retry-After). */
export function requestBudgetLayer(budget: RequestBudget) {
  return async (ctx: Context, next: Next): Promise<void> => {
    const header = ctx.get('authorization');
    const key = header ? `cred:${fingerprint(header)}` : `addr:${ctx.req.socket.remoteAddress ?? 'unknown'}`;
    const wait = await budget.spend(key);
    if (wait > 0) throw new HttpError(429, `Too many requests; try again in ${Math.ceil(wait / 1000)} s.`, { 'retry-after': String(Math.ceil(wait / 1000)) });
    await next();
  };
}

/** Protects a route: the caller must authenticate and hold the scope (403 names it). */
export function requireAuth(authenticator: HttpAuthenticator, scope?: string) {
  return async (ctx: Context, next: Next): Promise<void> => {
    const principal = await authenticator.authenticate(ctx.req);
    if (scope && !holds(principal, scope)) throw new HttpError(403, `This route needs the scope ${scope}.`);
    ctx.state.principal = principal;
    await next();
  };
}

export const isLoopbackRequest = (ctx: Context): boolean => isLoopbackAddress(ctx.req.socket.remoteAddress ?? '');
