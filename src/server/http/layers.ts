/**
 * The checks every route takes before its own, in this order, on the raw
 * request: the route must answer now (404) and take the method (405 with
 * Allow), no credential may ride in the query string (400), and the request
 * budget must allow it (429 with Retry-After). The HTTP application runs them
 * as its layers; a fast route runs the same ones before its handler. Kept
 * apart from the application so that fast routes never load Koa.
 */
import type { IncomingMessage } from 'node:http';
import { queryCarriesCredential, queryCredentialRefused } from '../auth/http-auth.ts';
import { DomainError, rateLimited } from '../kernel/errors.ts';
import type { FastRoute } from '../kernel/module.ts';

/** 405 for a method the path is not served with. */
export const methodNotAllowed = (method: string | undefined, allowed: readonly string[]): DomainError =>
  new DomainError('method_not_allowed', `${method} is not allowed here; use ${allowed.join(', ')}.`, { headers: { allow: allowed.join(', ') } });

/** 400 for a credential in the query string. */
export function refuseQueryCredential(req: IncomingMessage): void {
  if (queryCarriesCredential(req.url)) throw queryCredentialRefused();
}

/** 429 once a key has spent its budget. */
export function spendBudget(budget: { spend(key: string): number }, key: string): void {
  const wait = budget.spend(key);
  if (wait > 0) throw rateLimited(wait);
}

/** The layers a fast route takes before its handler; its budget is counted per address. */
export function admitFast(req: IncomingMessage, route: FastRoute, shared: { spend(key: string): number }): void {
  if (route.enabled && !route.enabled()) throw new DomainError('not_found', `No route for ${req.method} ${(req.url ?? '/').split('?')[0]}.`);
  if (!route.methods.includes(req.method ?? '')) throw methodNotAllowed(req.method, route.methods);
  refuseQueryCredential(req);
  spendBudget(route.budget ?? shared, `addr:${req.socket.remoteAddress ?? 'unknown'}`);
}
