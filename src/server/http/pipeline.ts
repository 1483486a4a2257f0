/**
 * The one HTTP pipeline. Every route, probes included, declares what it takes
 * (RouteRules: its authentication, its body, its budget, whether it answers
 * now) and the pipeline checks it, in this order, before the route's handler:
 *
 *   answering now (404), the method (405 with Allow), no credential in the
 *   query string (400), the request budget (429), the route's authentication
 *   on the headers (401, 403, or its verifier's refusal), its own admission
 *   (application routes), its body (415, 413, 400), its verifier over the
 *   body; then the handler.
 *
 * The checks of a route are put together once, leaving out what it does not
 * declare. Each runs at once and returns a promise only when it must wait (a
 * credential looked up, a body read), so a route that needs nothing
 * asynchronous, a probe, is answered in the tick its request arrived. Routes
 * answered before the application loads (probes, webhook deliveries, hooks)
 * run here on the raw request (serveEarly); the application's routes run the
 * same checks from its routes layer (app.ts).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { holds, queryCarriesCredential, queryCredentialRefused } from '../auth/http-auth.ts';
import { type IdentifiedResponse, sendError } from '../kernel/answer.ts';
import { readBody, type ReceivedBody } from '../kernel/body.ts';
import { DomainError, methodNotAllowed, rateLimited } from '../kernel/errors.ts';
import type { Budget, FastRoute, Principal, RawExchange, RouteRules } from '../kernel/registration.ts';

/** One request on its way through the pipeline: what the checks learnt, for the handler. */
export interface Exchange {
  readonly req: IncomingMessage;
  /** The caller, for a route that authenticates one. */
  principal?: Principal;
  /** The body, for a route that declares one. */
  received?: ReceivedBody;
  /** What the route's verifier returned. */
  verified?: unknown;
  /** Told when the connection must close after the answer (a body far past its limit). */
  abandon(): void;
}

/** What the pipeline needs of the daemon. */
export interface PipelineDeps {
  authenticator: {
    authenticate(req: IncomingMessage): Promise<Principal>;
    /** Whose budget a request spends: a credential valid lately, else its address. */
    budgetKey(req: IncomingMessage): string;
  };
  /** The budget every surface shares. */
  budget: Budget;
}

/** One check: a promise when it must wait, anything else once done; a refusal is thrown (or rejected). */
export type Check = (exchange: Exchange) => unknown;

/** The checks of one route, and from which of them a refusal is the route's own (told to FastRoute.refused). */
export interface Checks {
  list: readonly Check[];
  /** The index of the first check past the common gate (404, 405, 400, 429): its authentication. */
  own: number;
}

const isPromise = (value: unknown): value is Promise<unknown> => typeof (value as Promise<unknown> | undefined)?.then === 'function';

const pathOf = (url: string): string => {
  const query = url.indexOf('?');
  return query === -1 ? url : url.slice(0, query);
};

export const notFound = (req: IncomingMessage): DomainError => new DomainError('not_found', `No route for ${req.method} ${pathOf(req.url ?? '/')}.`);

const needsAdmin = () => new DomainError('forbidden', 'This route needs the gateway\'s own credential.');
const needsScope = (scope: string) => new DomainError('forbidden', `This route needs the scope ${scope}.`);

/** Authenticates the caller and requires a scope of it (admin: the gateway's own credential or a token holding admin). */
function principalCheck(deps: PipelineDeps, scope: string, open?: (req: IncomingMessage) => boolean): Check {
  const refusal = scope === 'admin' ? needsAdmin : () => needsScope(scope);
  return (exchange) => {
    if (open?.(exchange.req)) return undefined;
    return deps.authenticator.authenticate(exchange.req).then((principal) => {
      if (!holds(principal, scope)) throw refusal();
      exchange.principal = principal;
    });
  };
}

/** Runs a verifier's phase, keeping what it returns for the handler. */
const verifying = (phase: (exchange: Exchange) => unknown): Check => (exchange) => {
  const verified = phase(exchange);
  if (!isPromise(verified)) {
    exchange.verified = verified;
    return undefined;
  }
  return verified.then((value) => {
    exchange.verified = value;
  });
};

/**
 * The checks a route declares, in the pipeline's order. `methods`: the methods
 * of a route answered before the application (an application route's method
 * is the table's to match). `admit`: the application route's own admission.
 */
export function checksOf(route: RouteRules, deps: PipelineDeps, options: { methods?: readonly string[]; admit?: Check } = {}): Checks {
  const list: Check[] = [];
  const { enabled, auth, body, unmetered } = route;
  const budget = route.budget ?? deps.budget;
  if (enabled) {
    list.push((exchange) => {
      if (!enabled()) throw notFound(exchange.req);
    });
  }
  const methods = options.methods;
  if (methods) {
    list.push(({ req }) => {
      if (!methods.includes(req.method!)) throw methodNotAllowed(req.method, methods);
    });
  }
  list.push(({ req }) => {
    if (queryCarriesCredential(req.url)) throw queryCredentialRefused();
  });
  list.push(({ req }) => {
    if (unmetered?.(req)) return;
    const wait = budget.spend(deps.authenticator.budgetKey(req));
    if (wait > 0) throw rateLimited(wait);
  });
  const own = list.length;
  if (auth === 'gateway') list.push(principalCheck(deps, 'admin'));
  else if (typeof auth === 'object' && 'scope' in auth) list.push(principalCheck(deps, auth.scope, auth.open));
  const verifier = typeof auth === 'object' && 'verify' in auth ? auth.verify : undefined;
  if (verifier?.headers) list.push(verifying(({ req }) => verifier.headers!(req)));
  if (options.admit) list.push(options.admit);
  if (body) {
    list.push((exchange) => readBody(exchange.req, body, () => exchange.abandon()).then((received) => {
      exchange.received = received;
    }));
  }
  if (verifier?.body) {
    if (!body) throw new Error(`route ${route.path}: a verifier over the body needs the route to declare its body`);
    list.push(verifying((exchange) => verifier.body!(exchange.req, exchange.received!)));
  }
  return { list, own };
}

/** The checks of a path no route claims, before its 404: the query string and the budget. */
export const unmatchedChecks = (deps: PipelineDeps): Checks => checksOf({ path: '/', auth: 'public' }, deps);

/**
 * Runs checks from `from` on: at once while each answers at once, then after
 * each that must wait. Resolves (or returns) once all passed; throws or
 * rejects with the first refusal, its index in `exchange.step`.
 */
export function runChecks(checks: readonly Check[], exchange: Exchange & { step?: number }, from = 0): void | Promise<void> {
  for (let index = from; index < checks.length; index++) {
    exchange.step = index;
    const waiting = checks[index]!(exchange);
    if (isPromise(waiting)) return waiting.then(() => runChecks(checks, exchange, index + 1));
  }
  return undefined;
}

/** A request to a route answered before the application: the raw response and the request id beside what the checks learnt. */
export class EarlyExchange implements Exchange, RawExchange {
  principal?: Principal;
  received?: ReceivedBody;
  verified?: unknown;
  step = 0;
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly requestId: string;
  constructor(req: IncomingMessage, res: ServerResponse, requestId: string) {
    this.req = req;
    this.res = res;
    this.requestId = requestId;
    // Written with the answer's headers in its one writeHead (kernel/answer.ts).
    (res as IdentifiedResponse).requestId = requestId;
  }
  abandon(): void {
    this.res.setHeader('connection', 'close');
  }
}

/** A route answered before the application loads, with its checks put together. */
export interface EarlyRoute {
  route: FastRoute;
  checks: Checks;
}

export const earlyRoute = (route: FastRoute, deps: PipelineDeps): EarlyRoute => ({ route, checks: checksOf(route, deps, { methods: route.methods }) });

/**
 * Serves a route answered before the application: its checks, then its
 * handler; any refusal or failure answers the common error body with the
 * request id. The route's own refusals (its authentication onwards) are told
 * to it. Returns at once when nothing had to wait, having made no closure.
 */
export function serveEarly(early: EarlyRoute, exchange: EarlyExchange, onUnexpected: (error: unknown) => void): void | Promise<void> {
  let checked: void | Promise<void>;
  try {
    checked = runChecks(early.checks.list, exchange);
  } catch (error) {
    return refuseEarly(early, exchange, error, onUnexpected);
  }
  if (checked === undefined) return handleEarly(early, exchange, onUnexpected);
  return checked.then(() => handleEarly(early, exchange, onUnexpected), (error: unknown) => refuseEarly(early, exchange, error, onUnexpected));
}

function handleEarly(early: EarlyRoute, exchange: EarlyExchange, onUnexpected: (error: unknown) => void): void | Promise<void> {
  let answered: unknown;
  try {
    answered = early.route.handler(exchange);
  } catch (error) {
    return sendError(exchange.res, error, onUnexpected, early.route.unexpected);
  }
  if (!isPromise(answered)) return undefined;
  return answered.then(() => undefined, (error: unknown) => sendError(exchange.res, error, onUnexpected, early.route.unexpected));
}

function refuseEarly(early: EarlyRoute, exchange: EarlyExchange, error: unknown, onUnexpected: (error: unknown) => void): void {
  if (exchange.step >= early.checks.own) early.route.refused?.(error);
  sendError(exchange.res, error, onUnexpected, early.route.unexpected);
}

