import Koa from 'koa';
import type { Context, Next } from 'koa';
import type { Logger } from 'pino';
import type { HttpAuthenticator } from '../auth/http-auth.ts';
import type { RequestBudget } from '../auth/throttle.ts';
import type { ReceivedBody } from '../kernel/body.ts';
import { answerOf, methodNotAllowed, toDomainError } from '../kernel/errors.ts';
import type { HttpRoute, Principal, RouteContext } from '../kernel/module.ts';
import type { Routed } from '../kernel/observe.ts';
import type { RegistryTable, RouteMatch } from '../kernel/registry.ts';
import { checksOf, type Checks, type Exchange, notFound, type PipelineDeps, runChecks, unmatchedChecks } from './pipeline.ts';
import { requestIds } from './request-id.ts';

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
 * id and access log, the route (405 for a method its path is not served with),
 * then the pipeline's checks of the route as it declares them (pipeline.ts:
 * answering now, no credential in the query string, the request budget, its
 * authentication, its admission, its body) and its handler, or 404. Routes
 * answered before the application take the same pipeline (server.ts).
 */
export function createHttpApp({ logger, budget, authenticator, table }: HttpAppOptions): Koa {
  const app = new Koa({ proxy: false });
  app.silent = true;
  app.use(errorBodyLayer(logger));
  app.use(requestIdLayer(logger));
  app.use(matchLayer(table));
  app.use(routesLayer({ authenticator, budget }));
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
      const route = (ctx.state.match as RouteMatch | undefined)?.entry.value ?? (ctx.state.convention as HttpRoute | undefined);
      ctx.status = answer.status;
      ctx.set(answer.headers);
      // Routes that answer {ok: true, ...} say ok: false on every failure, whichever layer refused; some speak another convention.
      ctx.body = route?.errorBody ? route.errorBody(error, ctx as RouteContext) : route?.envelope ? { ok: false, ...answer.body } : answer.body;
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

/** A request to an application route on its way through the pipeline: what the checks learn goes where the handler reads it. */
class KoaExchange implements Exchange {
  step = 0;
  readonly ctx: RouteContext;
  constructor(ctx: RouteContext) {
    this.ctx = ctx;
  }
  get req(): RouteContext['req'] {
    return this.ctx.req;
  }
  get principal(): Principal | undefined {
    return this.ctx.state.principal as Principal | undefined;
  }
  set principal(principal: Principal | undefined) {
    this.ctx.state.principal = principal;
  }
  set received(received: ReceivedBody | undefined) {
    this.ctx.received = received;
  }
  get received(): ReceivedBody | undefined {
    return this.ctx.received;
  }
  get verified(): unknown {
    return this.ctx.verified;
  }
  set verified(verified: unknown) {
    this.ctx.verified = verified;
  }
  abandon(): void {
    this.ctx.set('connection', 'close');
  }
}

/**
 * The matched route through the pipeline's checks as it declares them (its
 * authentication, its own admission, its body, into ctx.state.principal,
 * ctx.received and ctx.verified), with its path parameters in ctx.params,
 * then its handler. A path no route claims takes the common checks, then 404.
 */
function routesLayer(deps: PipelineDeps) {
  const unmatched = unmatchedChecks(deps);
  // Put together at a route's first request: a table lives until the next reload, and its routes with it.
  const compiled = new WeakMap<HttpRoute, Checks>();
  const checksOfRoute = (route: HttpRoute): Checks => {
    let checks = compiled.get(route);
    if (!checks) {
      const admit = route.admit;
      checks = checksOf(route, deps, admit ? { admit: (exchange) => admit((exchange as KoaExchange).ctx) } : {});
      compiled.set(route, checks);
    }
    return checks;
  };
  return async (ctx: Context): Promise<void> => {
    const routed = ctx as RouteContext;
    const exchange = new KoaExchange(routed);
    const match = ctx.state.match as RouteMatch | undefined;
    if (!match) {
      await runChecks(unmatched.list, exchange);
      throw notFound(ctx.req);
    }
    const { entry, params } = match;
    ctx.state.owner = entry.owner;
    routed.params = params;
    await runChecks(checksOfRoute(entry.value).list, exchange);
    await entry.value.handler(routed);
  };
}
