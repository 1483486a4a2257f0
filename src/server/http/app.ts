import Koa from 'koa';
import type { Logger } from 'pino';
import { errorBodyLayer, notFoundLayer } from './error-body.ts';
import { randomUUID } from 'node:crypto';
import type Router from '@koa/router';

export interface HttpAppOptions {
  logger: Logger;
  /** One router per surface, mounted in order. */
  surfaces: Router[];
}

/**
 * The HTTP application, read top to bottom as its layers: error body, request
 * id and access log, then one router per surface, then 404 for the rest.
 * Probes never reach it (see probes.ts).
 */
export function createHttpApp({ logger, surfaces }: HttpAppOptions): Koa {
  const app = new Koa({ proxy: false });
  app.silent = true;

  app.use(errorBodyLayer((error, ctx) => logger.error({ err: error, method: ctx.method, path: ctx.path, requestId: ctx.state.requestId }, 'request failed')));
  app.use(async (ctx, next) => {
    ctx.state.requestId = randomUUID();
    ctx.set('x-request-id', ctx.state.requestId);
    const started = performance.now();
    await next();
    logger.debug({ method: ctx.method, path: ctx.path, status: ctx.status, ms: Math.round(performance.now() - started), requestId: ctx.state.requestId }, 'request');
  });
  for (const surface of surfaces) {
    app.use(surface.routes());
    app.use(surface.allowedMethods());
  }
  app.use(notFoundLayer);
  return app;
}
