import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { HttpAuthenticator } from '../auth/http-auth.ts';
import type { RequestBudget } from '../auth/throttle.ts';
import { sendJson } from '../kernel/answer.ts';
import type { FastRoute } from '../kernel/module.ts';
import type { RegistryTable } from '../kernel/registry.ts';
import { answerProbe, type ProbeOptions } from './probes.ts';

/**
 * node:http through getBuiltinModule, not an ESM import: importing it as a
 * module reads every export, and its lazy WebSocket getters load all of
 * undici (megabytes of memory and milliseconds of start-up) for nothing.
 */
const { createServer } = process.getBuiltinModule('node:http');

export interface HttpServerOptions {
  logger: Logger;
  probes: ProbeOptions;
  /** The route a module answers ahead of the HTTP application, for a path. */
  fastRoute: (path: string) => FastRoute | undefined;
  budget: RequestBudget;
  authenticator: HttpAuthenticator;
  table: () => RegistryTable;
}

/**
 * The daemon's one HTTP server. Probes and the fast routes (webhook
 * deliveries, hooks) are answered first, on the raw request. The Koa
 * application behind every other route is loaded on the first request that
 * needs it, so a daemon that only serves probes and the control plane stays lean.
 */
export function createHttpServer(options: HttpServerOptions): Server {
  let handler: Promise<(req: IncomingMessage, res: ServerResponse) => Promise<void>> | undefined;
  const loadHandler = async () => {
    const { createHttpApp } = await import('./app.ts');
    return createHttpApp({ logger: options.logger, budget: options.budget, authenticator: options.authenticator, table: options.table }).callback();
  };
  return createServer({ keepAliveTimeout: 5000, requestTimeout: 30_000, headersTimeout: 10_000 }, (req, res) => {
    if (answerProbe(req, res, options.probes)) return;
    const url = req.url ?? '/';
    const query = url.indexOf('?');
    const fast = options.fastRoute(query === -1 ? url : url.slice(0, query));
    if (fast) return fast.handler(req, res);
    handler ??= loadHandler();
    handler.then((handle) => handle(req, res), (error: unknown) => {
      options.logger.error({ err: error }, 'the HTTP application failed to load');
      sendJson(res, 500, { error: 'internal', message: 'The gateway could not load its HTTP application; see its log.', statusCode: 500 });
    });
  });
}
