import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import type { BindTarget } from '../../shared/config/exposure.ts';
import { GatewayError } from '../../shared/errors.ts';
import { inspectDaemon } from '../../shared/daemon-lock.ts';
import { profilePaths, type ProfilePaths } from '../../shared/profile.ts';
import { listProfileNames } from '../../shared/profiles.ts';
import type { Logger } from 'pino';
import type { HttpAuthenticator } from '../auth/http-auth.ts';
import type { RequestBudget } from '../auth/throttle.ts';
import { sendError } from '../kernel/answer.ts';
import type { FastRoute } from '../kernel/module.ts';
import type { RegistryTable } from '../kernel/registry.ts';
import type { GatewayConfig } from '../../shared/config/types.ts';
import { DomainError, errorBodyOf } from '../kernel/errors.ts';
import { EarlyExchange, earlyRoute, type EarlyRoute, serveEarly } from './pipeline.ts';
import { requestIds, type RequestIds } from './request-id.ts';
import { observed, type HttpObserved, type Routed } from '../kernel/observe.ts';
import { performance } from 'node:perf_hooks';
import { PROBE_PATHS, probeRoutes, type Readiness } from './probes.ts';

/**
 * node:http through getBuiltinModule, not an ESM import: importing it as a
 * module reads every export, and its lazy WebSocket getters load all of
 * undici (megabytes of memory and milliseconds of start-up) for nothing.
 */
const { createServer, STATUS_CODES } = process.getBuiltinModule('node:http');

export interface HttpServerOptions {
  logger: Logger;
  config: () => GatewayConfig;
  /** Whether the bind reaches beyond loopback. */
  exposed: boolean;
  readiness: () => Readiness;
  problems: () => Record<string, string>;
  /** What readiness tells an authenticated caller. */
  detail: () => Record<string, unknown>;
  /** The route a module answers before the HTTP application, for a path. */
  fastRoute: (path: string) => FastRoute | undefined;
  budget: RequestBudget;
  authenticator: HttpAuthenticator;
  table: () => RegistryTable;
}

/**
 * The daemon's one HTTP server. Every request gets its request id first. The
 * probes and the routes modules answer before the application (webhook
 * deliveries, hooks) are served next, on the raw request, through the pipeline
 * every route takes (pipeline.ts). The Koa application behind every other
 * route is loaded on the first request that needs it, so a daemon that only
 * serves probes and the control plane stays lean.
 */
export function createHttpServer(options: HttpServerOptions): Server {
  const { authenticator, budget, config } = options;
  const onUnexpected = (error: unknown) => options.logger.error({ err: error }, 'request failed');
  const requestId = requestIds();
  const deps = { authenticator, budget };
  const probes = new Map<string, EarlyRoute>(probeRoutes({
    readiness: options.readiness,
    problems: options.problems,
    exposed: options.exposed,
    presentsCredential: (req) => req.headers.authorization !== undefined
      || (config().gateway.auth.mode === 'trusted-proxy' && req.headers[config().gateway.auth.trustedProxy.userHeader] !== undefined),
    authenticate: (req) => authenticator.authenticate(req),
    detail: options.detail,
  }).map((route) => [route.path, earlyRoute(route, deps)]));
  // A module's routes, put together at their first request (they are set once, while the modules are set up).
  const early = new WeakMap<FastRoute, EarlyRoute>();
  const earlyOf = (route: FastRoute): EarlyRoute => {
    let found = early.get(route);
    if (!found) {
      found = earlyRoute(route, deps);
      early.set(route, found);
    }
    return found;
  };
  type Handle = (req: IncomingMessage, res: ServerResponse) => Promise<void>;
  let handler: Promise<Handle> | undefined;
  /** The application once loaded: later requests go straight in, without waiting on a promise first. */
  let loaded: Handle | undefined;
  const loadHandler = async () => {
    const { createHttpApp } = await import('./app.ts');
    loaded = createHttpApp({ logger: options.logger, budget: options.budget, authenticator: options.authenticator, table: options.table }).callback();
    return loaded;
  };
  const server = createServer({ keepAliveTimeout: 5000, requestTimeout: 30_000, headersTimeout: 10_000 }, (req, res) => {
    const started = observed.http.hasSubscribers ? performance.now() : -1;
    const id = requestId.of(req);
    const url = req.url!;
    const query = url.indexOf('?');
    const path = query === -1 ? url : url.slice(0, query);
    const probe = probes.get(path);
    if (probe) {
      // Most probes are answered at once: told now, without waiting for the response's finish.
      serveEarly(probe, new EarlyExchange(req, res, id), onUnexpected);
      if (started >= 0) {
        if (res.writableEnded) tell(req, res, started);
        else watchRequest(req, res, started);
      }
      return;
    }
    if (started >= 0) watchRequest(req, res, started);
    const fast = options.fastRoute(path);
    if (fast) {
      // Observed under its template once path and method match, as the application's routes are.
      if (fast.methods.includes(req.method!)) (res as Routed).gatewayRoute = fast.path;
      return void serveEarly(earlyOf(fast), new EarlyExchange(req, res, id), onUnexpected);
    }
    res.setHeader('x-request-id', id);
    if (loaded) return void loaded(req, res);
    handler ??= loadHandler();
    handler.then((handle) => handle(req, res), (error: unknown) => {
      options.logger.error({ err: error }, 'the HTTP application failed to load');
      sendError(res, new DomainError('internal', 'The gateway could not load its HTTP application; see its log.'), onUnexpected);
    });
  });
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) => answerMalformed(error, socket, requestId));
  return server;
}

const PROBES = new Set<string>(PROBE_PATHS);

/** Tells observers of each request once it is answered: the route's template, never the path itself (it may hold ids). */
function watchRequest(req: IncomingMessage, res: ServerResponse, started: number): void {
  res.once('finish', () => tell(req, res, started));
}

function tell(req: IncomingMessage, res: ServerResponse, started: number): void {
  let route = (res as Routed).gatewayRoute;
  if (route === undefined) {
    const url = req.url ?? '/';
    const query = url.indexOf('?');
    const path = query === -1 ? url : url.slice(0, query);
    route = PROBES.has(path) ? path : 'unmatched';
  }
  observed.http.publish({ method: req.method ?? 'GET', route, status: res.statusCode, seconds: (performance.now() - started) / 1000 } satisfies HttpObserved);
}

/** What a message that is not HTTP, or not HTTP the server takes, gets: the common error body, then the connection closes. */
const MALFORMED: Record<string, [number, string]> = {
  HPE_HEADER_OVERFLOW: [431, 'The request\'s headers are larger than the gateway takes (16 KiB).'],
  ERR_HTTP_REQUEST_TIMEOUT: [408, 'The request did not arrive whole in time.'],
};
function answerMalformed(error: NodeJS.ErrnoException, socket: Duplex, ids: RequestIds): void {
  // Nothing can be written once an answer has begun, or to a socket that is gone.
  const busy = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent;
  if (error.code === 'ECONNRESET' || !socket.writable || busy) {
    socket.destroy();
    return;
  }
  const [status, message] = MALFORMED[error.code ?? ''] ?? [400, 'The request is not well-formed HTTP/1.1.'];
  const body = JSON.stringify(errorBodyOf('invalid', message, status));
  socket.end(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nx-request-id: ${ids.made()}\r\nconnection: close\r\n\r\n${body}`);
}

/** Listens on the profile's port and address; resolves with the port (a free one when asked for 0). Failures name the cause and the fix. */
export function listen(server: Server, target: { port: number; bind: BindTarget; paths: ProfilePaths }): Promise<number> {
  const { port, bind, paths } = target;
  return new Promise((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'EADDRINUSE') reject(portInUse(port, bind, paths));
      else if (error.code === 'EACCES') reject(new GatewayError(`Not allowed to listen on port ${port} of ${bind.host} (profile "${paths.name}").`, { hints: ['choose a port above 1023: gateway config set gateway.port <port>'] }));
      else if (error.code === 'EADDRNOTAVAIL') reject(new GatewayError(`${bind.host} is not an address of this host (profile "${paths.name}").`, { kind: 'invalid_config' }));
      else reject(error);
    });
    server.listen({ port, host: bind.host, backlog: 511 }, () => resolve((server.address() as AddressInfo).port));
  });
}

/** Who holds a port: another profile's daemon when one does, so the message can say which. */
function portInUse(port: number, bind: BindTarget, paths: ProfilePaths): GatewayError {
  let owner = 'another process';
  for (const name of listProfileNames(paths.home)) {
    if (name === paths.name) continue;
    const found = inspectDaemon(profilePaths(name, paths.home));
    if ((found.state === 'running' || found.state === 'starting') && found.record.port === port) {
      owner = `profile "${name}" (pid ${found.record.pid})`;
      break;
    }
  }
  return new GatewayError(`Port ${port} on ${bind.host} is already in use by ${owner}; profile "${paths.name}" cannot listen there.`, {
    code: 'PORT_IN_USE',
    hints: [`gateway start --profile ${paths.name} --port <port>`, `gateway config set gateway.port <port> --profile ${paths.name}`],
  });
}
