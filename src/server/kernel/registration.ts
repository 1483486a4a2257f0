/**
 * The registration half of the module interface: what a module or a plugin
 * registers (routes, methods, tools, channels, job kinds) and who calls it.
 * The table of the daemon (registry.ts) is built from these, and the module
 * interface (module.ts) offers them.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Context } from 'koa';
import type { Logger } from 'pino';
import type { WebSocket } from 'ws';
import type { MethodName, MethodParams } from '../../shared/protocol/methods.ts';
import type { MethodResult } from '../../shared/protocol/results.ts';
import type { OperatorScope, TokenScope } from '../../shared/protocol/scopes.ts';
import type { Db } from '../store/database.ts';
import type { Parameter } from '../store/engine.ts';
import type { ReceivedBody, RouteBody } from './body.ts';
import type { ChannelKind } from './channel.ts';
import type { DomainError } from './errors.ts';

/** Who is calling over the WebSocket: the authenticated connection's identity and grants. */
export interface RpcClient {
  connectionId: string;
  clientId: string;
  role: string;
  scopes: ReadonlySet<string>;
  address: string;
  deviceId: string;
  /** Aborted when the connection closes: long methods stop working for a client that went away. */
  closed?: AbortSignal;
}

/** Who made an HTTP request, once authenticated. */
export interface Principal {
  kind: 'gateway' | 'proxy-user' | 'overlay' | 'anonymous' | 'token' | 'jwt' | 'service';
  /** A stable name for logs and ownership: never a secret. */
  subject: string;
  /** Scopes held; the gateway's own credential holds every scope. */
  scopes: ReadonlySet<string> | 'all';
  /** The credential itself when several share an owner (a product token's id): what per-credential limits count. */
  credentialId?: string;
}

/**
 * Another kind of bearer credential (product tokens, JWTs, the service key):
 * a principal, undefined when the value is not one of its kind, or a string
 * saying why a value of its kind is refused (expired, revoked).
 */
export type BearerVerifier = (value: string) => Promise<Principal | string | undefined> | Principal | string | undefined;

/**
 * A route's own credential, checked by the HTTP pipeline and never by its
 * handler: a signature over the body, a secret in a header, a login's state.
 * `headers` is checked before the body is read (a token; whether a secret is
 * configured at all), `body` over the body once read (the route declares
 * one). Either throws a DomainError to refuse (401, 400, 503, 429); what the
 * last of them returns is handed to the handler (`verified`). Secrets are
 * compared in constant time (kernel/verifiers.ts).
 */
export interface RouteVerifier {
  headers?(req: IncomingMessage): unknown;
  body?(req: IncomingMessage, body: ReceivedBody): unknown;
}

/**
 * Who may call a route, declared on it and checked by the HTTP pipeline
 * before the handler runs. `public`: anyone. `gateway`: the gateway's own
 * credential (or a token with admin). `{scope}`: the gateway credential or a
 * principal holding the scope; with `open`, anyone for whom it says so (a
 * loopback caller, where a setting allows it). `{verify}`: a credential of the
 * route's own (RouteVerifier; the channels' webhook routes declare the
 * channel's own check, Channel.verify). `plugin`: the handler authenticates
 * the caller itself: a plugin's route.
 */
export type RouteAuth =
  | 'public'
  | 'gateway'
  | 'plugin'
  | { scope: TokenScope; open?: (req: IncomingMessage) => boolean }
  | { verify: RouteVerifier };

/** A request budget: how long a key must wait (ms), or 0 once it is counted. */
export interface Budget {
  spend(key: string): number;
}

/** What every route declares for the pipeline, whichever way it is answered (http/pipeline.ts runs it). */
export interface RouteRules {
  /** A plain path; a segment `:name` matches any one segment (in ctx.params). */
  path: string;
  /** exact (default): the path only; prefix: the path and everything below it, segment by segment. */
  match?: 'exact' | 'prefix';
  auth: RouteAuth;
  /** Whether it answers at all now (404 while not, before anything else; it may throw a 404 of its own naming the setting that turns it on); always when unset. */
  enabled?: () => boolean;
  /** The budget its requests spend (429 past it); the one every surface shares when unset. */
  budget?: Budget;
  /** Requests its budget does not count (a probe from loopback). */
  unmetered?: (req: IncomingMessage) => boolean;
  /** The body it takes, read by the pipeline after authentication and before the handler; a route that declares none has its body left unread. */
  body?: RouteBody;
}

/**
 * Koa's context, with the route's path parameters, the body the pipeline read
 * when it declares one, and what its verifier returned (RouteVerifier); the
 * caller's principal, for routes that authenticate one, is in ctx.state.principal.
 */
export type RouteContext = Context & { params: Record<string, string>; received?: ReceivedBody; verified?: unknown };

export interface HttpRoute extends RouteRules {
  /** GET, POST, ... or * for any method. HEAD falls back to GET. */
  method: string;
  /** The route answers {ok: true, ...}; its failures then say ok: false too. */
  envelope?: boolean;
  /** The body of the route's errors when it speaks another convention than the gateway's (the inference API's, a page for a browser). */
  errorBody?: (error: DomainError, ctx: RouteContext) => unknown;
  /** The route's own checks after authentication and before its body is read (an endpoint switched off, a credential's limits). */
  admit?: (ctx: RouteContext) => unknown | Promise<unknown>;
  handler: (ctx: RouteContext) => unknown | Promise<unknown>;
}

/**
 * A route answered before the HTTP application loads, on the raw request: for
 * the probes and the hottest surfaces (webhook deliveries, hooks). It takes the
 * same pipeline as every route (http/pipeline.ts): answering now (404), its
 * methods (405 with Allow), no credential in the query (400), a request budget
 * (429), its authentication, its body, then its handler. Built-in modules only.
 */
export interface FastRoute extends RouteRules {
  /** The methods it answers; others get 405 with Allow. */
  methods: readonly string[];
  /** Told when the pipeline refuses a request before the handler, for a route that counts its refusals. */
  refused?: (error: unknown) => void;
  /** What an unexpected failure says when the route has more to tell its caller than the generic message. */
  unexpected?: string;
  /**
   * Answers the request with sendJson or sendEmpty (kernel/answer.ts), which
   * write its request id; a failure it throws or rejects with is answered
   * with the error body.
   */
  handler: (exchange: RawExchange) => unknown | Promise<unknown>;
}

/** A request to a route answered before the application, as its handler gets it: what the pipeline learnt beside the raw request. */
export interface RawExchange {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  /** The request's id, written with the answer (x-request-id) by sendJson and sendEmpty. */
  readonly requestId: string;
  /** The caller, for a route that authenticates one. */
  readonly principal?: Principal;
  /** The body, for a route that declares one. */
  readonly received?: ReceivedBody;
  /** What the route's verifier returned. */
  readonly verified?: unknown;
}

export interface WsRoute {
  path: string;
  auth: 'gateway' | 'plugin';
  handler: (socket: WebSocket, request: IncomingMessage) => void;
}

export type MethodHandler = (params: unknown, client: RpcClient) => unknown | Promise<unknown>;

/** A method declared in the protocol (src/shared/protocol/methods.ts): its scope and params schema come from there. */
export interface ProtocolMethod<M extends MethodName> {
  name: M;
  handler: (params: MethodParams<M>, client: RpcClient) => MethodResult<M> | Promise<MethodResult<M>>;
}

/** Any method of the protocol, told apart by its name. */
export type AnyProtocolMethod = { [M in MethodName]: ProtocolMethod<M> }[MethodName];

/** A method a module or plugin declares itself: the scope it needs, and optionally a JSON Schema its params must meet. */
export interface OwnMethod {
  name: string;
  scope: OperatorScope;
  params?: Record<string, unknown>;
  handler: MethodHandler;
}

/** Who invoked a tool, and how. */
export interface ToolContext {
  /** A stable caller name (never a secret). */
  caller: string;
  surface: 'http' | 'ws' | 'agent';
  /** The agent whose run calls the tool (surface agent). */
  agent?: string;
  /**
   * Whom the call acts for (src/server/kernel/person.ts): the person of the
   * run's conversation, or the caller itself over HTTP and the WebSocket.
   * Set by the daemon, never from the call's arguments.
   */
  person: string;
  /**
   * Whose spending the run is (its credential on the inference API, its
   * automation): a task it hands on spends it too, under its budgets.
   */
  subject?: string;
  sessionKey?: string;
  /** The agent run that calls it, and the call's id in that run (surface agent). */
  runId?: string;
  callId?: string;
  /** Where the run's answer goes on its channel (a chat, a thread), when it answers a channel message. */
  replyTo?: string;
  logger: Logger;
}

export interface ToolDef {
  name: string;
  description: string;
  /** JSON Schema of the arguments (an object schema); args are checked against it before the handler runs. */
  inputSchema?: Record<string, unknown>;
  /** Changes the host or the gateway itself: refused over HTTP unless gateway.tools.allow names it. */
  dangerous?: boolean;
  /** Why a dangerous tool is gated when it is not the gateway's own (it runs on another server): said in refusals. */
  external?: string;
  handler: (args: Record<string, unknown>, context: ToolContext) => unknown | Promise<unknown>;
}

export interface JobContext {
  /**
   * Where the handler reads and writes: the transaction its job's outcome
   * commits in, for a handler that only touches the store (declared
   * `transactional`), else the store itself.
   */
  db: Db;
  /**
   * A write the handler need not wait for: it is made with the job's outcome
   * (on PostgreSQL in the same round trip as the commit), and its failure
   * fails the attempt.
   */
  send(sql: string, ...params: Parameter[]): void;
  jobId: string;
  attempt: number;
}

/** Does a job's work and returns its result (stored as JSON); throwing fails the attempt. */
export type JobHandler = (payload: unknown, context: JobContext) => unknown | Promise<unknown>;

export interface JobKindOptions {
  /**
   * The handler only reads and writes the store, through `context.db`, and
   * waits for nothing else: it may run inside the transaction that records its
   * job's outcome (and, on SQLite, the one that queues the job). Its writes
   * must be safe to make twice: a job is run again when its daemon dies
   * before its outcome is recorded.
   */
  transactional?: boolean;
  /** Jobs of this kind change what the next one builds on: they run one after another, in the order they were queued. */
  ordered?: boolean;
}

/** A job kind's handler as the table holds it. */
export interface JobKind extends JobKindOptions {
  run: JobHandler;
}

/**
 * What a plugin's register(api) receives, and the table half of every
 * module's context: what it registers here is rebuilt into a fresh table at
 * each reload and swapped in at once.
 */
export interface RegistrationApi {
  readonly name: string;
  http: { route(route: HttpRoute): void };
  ws: { route(route: WsRoute): void };
  rpc: {
    /** A method of the protocol: its scope and params schema come from src/shared/protocol/methods.ts, its types with them. */
    method(method: AnyProtocolMethod): void;
    method(method: OwnMethod): void;
  };
  tools: { add(tool: ToolDef): void };
  /** A channel: its id (the key under `channels.` in the config) with the channel kind's parts. */
  channels: { add(channel: ChannelKind & { id: string }): void };
  /** A job kind; a kind ending in `.*` handles every kind with that prefix that has no handler of its own. */
  jobs: { handle(kind: string, handler: JobHandler, options?: JobKindOptions): void };
  log: Logger;
}

/** What a plugin module exports: register(api), which may return a function called when its table is let go. */
export type RegisterFn = (api: RegistrationApi) => unknown;
