import Koa from 'koa';
import type { Context, Next } from 'koa';
import type { Logger } from 'pino';
import { holds, type HttpAuthenticator } from '../auth/http-auth.ts';
import type { RequestBudget } from '../auth/throttle.ts';
import { answerOf, DomainError, toDomainError } from '../kernel/errors.ts';
import type { RouteContext } from '../kernel/module.ts';
import type { RegistryTable, RouteMatch } from '../kernel/registry.ts';
import { readBody } from '../kernel/body.ts';
import { methodNotAllowed, refuseQueryCredential, spendBudget } from './layers.ts';
import { requestIds } from './request-id.ts';
import type { Routed } from '../kernel/observe.ts';

export interface HttpAppOptions {
  logger: Logger;
  /** The request budget every surface shares. */
  budget: RequestBudget;
  authenticator: HttpAuthenticator;
  /** The table in force when a request arrives: a reload swaps it, and requests already inside finish on the old one. */
  table: () => RegistryTable;
}

/**
 * The HTTP application, read top to bottom as its layers: error body, request
 * id and access log, the route (404, 405), no credentials in query strings,
 * the request budget, then the route of a module or plugin from the table in
 * force: authenticated, admitted and its body read as it declares, then its
 * handler. Probes and fast routes take the same layers ahead of it (layers.ts).
 */
export function createHttpApp({ logger, budget, authenticator, table }: HttpAppOptions): Koa {
  const app = new Koa({ proxy: false });
  app.silent = true;
  app.use(errorBodyLayer(logger));
  app.use(requestIdLayer(logger));
  app.use(matchLayer(table));
  app.use(queryCredentialLayer);
  app.use(requestBudgetLayer(budget, authenticator));
  app.use(routesLayer(authenticator));
  app.use(notFoundLayer);
  return app;
}

/** The outermost layer: every failure leaves as the error body; unexpected ones say nothing about internals. */
function errorBodyLayer(logger: Logger) {
  return async (ctx: Context, next: Next): Promise<void> => {
    try {
      await next();
    } catch (thrown) {
      const { error, unexpected } = toDomainError(thrown);
      if (unexpected) logger.error({ err: thrown, method: ctx.method, path: ctx.path, requestId: ctx.state.requestId }, 'request failed');
      const answer = answerOf(error);
      // The matched route's convention, else (a method the path does not serve) the convention of the path's routes.
      const route = (ctx.state.match as RouteMatch | undefined)?.entry.value ?? (ctx.state.convention as RouteMatch['entry']['value'] | undefined);
      ctx.status = answer.status;
      // Routes that answer {ok: true, ...} say ok: false on every failure, whichever layer refused; some speak another convention.
      ctx.body = route?.errorBody ? route.errorBody(error) : route?.envelope ? { ok: false, ...answer.body } : answer.body;
      ctx.set(answer.headers);
    }
  };
}

/** The request id the server gave the request (request-id.ts), or one made here when the application runs on its own. */
function requestIdLayer(logger: Logger) {
  const ids = requestIds();
  return async (ctx: Context, next: Next): Promise<void> => {
    const given = ctx.res.getHeader('x-request-id');
    ctx.state.requestId = typeof given === 'string' ? given : ids.of(ctx.req);
    ctx.set('x-request-id', ctx.state.requestId);
    const started = performance.now();
    await next();
    if (logger.isLevelEnabled('debug')) {
      logger.debug({ method: ctx.method, path: ctx.path, status: ctx.status, ms: Math.round(performance.now() - started), requestId: ctx.state.requestId }, 'request');
    }
  };
}

/** Refuses any request that carries a credential in its query string (400). */
async function queryCredentialLayer(ctx: Context, next: Next): Promise<void> {
  refuseQueryCredential(ctx.req);
  await next();
}

/** A request budget per valid credential, else per address (429 with Retry-After). */
function requestBudgetLayer(budget: RequestBudget, authenticator: HttpAuthenticator) {
  return async (ctx: Context, next: Next): Promise<void> => {
    spendBudget(budget, authenticator.budgetKey(ctx.req));
    await next();
  };
}

/**
 * Finds the route of the table in force first, so every later layer's refusal
 * answers in the route's convention. A path served only with other methods is 405.
 */
function matchLayer(table: () => RegistryTable) {
  return async (ctx: Context, next: Next): Promise<void> => {
    const current = table();
    const match = current.route(ctx.method, ctx.path);
    if (!match) {
      const allowed = current.allowedMethods(ctx.path);
      if (allowed.length > 0 && !allowed.includes('*')) {
        ctx.state.convention = current.route(allowed[0]!, ctx.path)?.entry.value;
        throw methodNotAllowed(ctx.method, allowed);
      }
    }
    ctx.state.match = match;
    if (match) (ctx.res as Routed).gatewayRoute = match.entry.value.path;
    await next();
  };
}

/**
 * The matched route: authenticated as it declares (a scope, the gateway's own
 * credential, or the handler's own check), admitted by its own checks, its
 * body read as it declares (ctx.received), with its path parameters in ctx.params.
 */
function routesLayer(authenticator: HttpAuthenticator) {
  return async (ctx: Context, next: Next): Promise<void> => {
    const match = ctx.state.match as RouteMatch | undefined;
    if (!match) {
      await next();
      return;
    }
    const { entry, params } = match;
    const route = entry.value;
    ctx.state.owner = entry.owner;
    const routed = ctx as RouteContext;
    routed.params = params;
    const auth = route.auth;
    if (auth !== 'public' && auth !== 'plugin') {
      const principal = await authenticator.authenticate(ctx.req);
      if (auth === 'gateway' && !holds(principal, 'admin')) throw new DomainError('forbidden', 'This route needs the gateway\'s own credential.');
      if (typeof auth === 'object' && !holds(principal, auth.scope)) throw new DomainError('forbidden', `This route needs the scope ${auth.scope}.`);
      ctx.state.principal = principal;
    }
    if (route.admit) await route.admit(routed);
    if (route.body) routed.received = await readBody(ctx.req, route.body, () => ctx.set('connection', 'close'));
    await route.handler(routed);
  };
}

/** The innermost layer: any path no route claimed. */
async function notFoundLayer(ctx: Context): Promise<void> {
  throw new DomainError('not_found', `No route for ${ctx.method} ${ctx.path}.`);
}
