import Koa from 'koa';
import type { Logger } from 'pino';
import { errorBodyLayer, notFoundLayer } from './error-body.ts';
import { randomBytes } from 'node:crypto';
import type Router from '@koa/router';
import type { RequestBudget } from '../auth/throttle.ts';
import { queryCredentialLayer, requestBudgetLayer } from './guards.ts';

export interface HttpAppOptions {
  logger: Logger;
  /** The request budget every surface shares. */
  budget: RequestBudget;
  /** One router per surface, mounted in order. */
  surfaces: Router[];
  /** Layers after the surfaces (plugin routes), before the 404. */
  after?: Koa.Middleware[];
  /** Paths whose answers carry ok: true/false, failures included. */
  envelopePaths?: ReadonlySet<string>;
}

/**
 * The HTTP application, read top to bottom as its layers: error body, request
 * id and access log, no credentials in query strings, the request budget, then
 * one router per surface (each protecting its routes with requireAuth), then
 * 404 for the rest.
 * Probes never reach it (see probes.ts).
 */
export function createHttpApp({ logger, budget, surfaces, after = [], envelopePaths = new Set() }: HttpAppOptions): Koa {
  const app = new Koa({ proxy: false });
  app.silent = true;

  app.use(errorBodyLayer(
    (error, ctx) => logger.error({ err: error, method: ctx.method, path: ctx.path, requestId: ctx.state.requestId }, 'request failed'),
    (ctx) => envelopePaths.has(ctx.path),
  ));
  // Request ids: this daemon's prefix and a counter, unique without drawing randomness per request.
  const prefix = randomBytes(4).toString('hex');
  let counter = 0;
  app.use(async (ctx, next) => {
    ctx.state.requestId = `${prefix}-${(++counter).toString(36)}`;
    ctx.set('x-request-id', ctx.state.requestId);
    const started = performance.now();
    await next();
    if (logger.isLevelEnabled('debug')) {
      logger.debug({ method: ctx.method, path: ctx.path, status: ctx.status, ms: Math.round(performance.now() - started), requestId: ctx.state.requestId }, 'request');
    }
  });
  app.use(queryCredentialLayer);
  app.use(requestBudgetLayer(budget));
  for (const surface of surfaces) {
    app.use(surface.routes());
    app.use(surface.allowedMethods());
  }
  for (const layer of after) app.use(layer);
  app.use(notFoundLayer);
  return app;
}
