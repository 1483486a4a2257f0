/**
 * The checks every route takes before its own, in this order, on the raw
 * request: the route must answer now (404) and take the method (405 with
 * Allow), no credential may ride in the query string (400), and the request
 * budget must allow it (429 with Retry-After). Then the route's own
 * authentication and its body, as it declares them. The HTTP application runs
 * them as its layers; a fast route runs the same ones here (serveFast). Kept
 * apart from the application so that fast routes never load Koa.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { queryCarriesCredential, queryCredentialRefused } from '../auth/http-auth.ts';
import { sendError } from '../kernel/answer.ts';
import { readBody } from '../kernel/body.ts';
import { DomainError, methodNotAllowed, rateLimited } from '../kernel/errors.ts';
import type { FastRoute } from '../kernel/module.ts';
import type { Routed } from '../kernel/observe.ts';

export { methodNotAllowed };

/** 400 for a credential in the query string. */
export function refuseQueryCredential(req: IncomingMessage): void {
  if (queryCarriesCredential(req.url)) throw queryCredentialRefused();
}

/** 429 once a key has spent its budget. */
export function spendBudget(budget: { spend(key: string): number }, key: string): void {
  const wait = budget.spend(key);
  if (wait > 0) throw rateLimited(wait);
}

/** The layers a fast route takes before its own admission; its budget is counted per address. */
export function admitFast(req: IncomingMessage, route: FastRoute, shared: { spend(key: string): number }): void {
  if (route.enabled && !route.enabled()) throw new DomainError('not_found', `No route for ${req.method} ${(req.url ?? '/').split('?')[0]}.`);
  if (!route.methods.includes(req.method ?? '')) throw methodNotAllowed(req.method, route.methods);
  refuseQueryCredential(req);
  spendBudget(route.budget ?? shared, `addr:${req.socket.remoteAddress ?? 'unknown'}`);
}

/**
 * A fast route, whole: the common layers, its own admission (its credential),
 * its body read as it declares it, then its handler; any failure answers the
 * common error body.
 */
export async function serveFast(req: IncomingMessage, res: ServerResponse, route: FastRoute, shared: { spend(key: string): number }, onUnexpected: (error: unknown) => void): Promise<void> {
  try {
    admitFast(req, route, shared);
  } catch (error) {
    return sendError(res, error, onUnexpected);
  }
  (res as Routed).gatewayRoute = route.path;
  let body;
  try {
    if (route.admit) await route.admit(req);
    if (route.body) body = await readBody(req, route.body, () => res.setHeader('connection', 'close'));
  } catch (error) {
    route.refused?.(error);
    return sendError(res, error, onUnexpected, route.unexpected);
  }
  try {
    await route.handler(req, res, body);
  } catch (error) {
    sendError(res, error, onUnexpected, route.unexpected);
  }
}
