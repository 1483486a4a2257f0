/**
 * The module interface: every feature of the daemon is a module, and a plugin
 * is a module loaded from outside. A module registers what it offers through
 * one context; the table half of that context (routes, methods, tools,
 * channels, job handlers) is all a plugin gets.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Context } from 'koa';
import type { Logger } from 'pino';
import type { WebSocket } from 'ws';
import type { GatewayConfig } from '../../shared/config/types.ts';
import type { ConnectAuth, ConnectParams } from '../../shared/protocol/frames.ts';
import type { MethodName, MethodParams } from '../../shared/protocol/methods.ts';
import type { BuildOutcome, MethodResult, PluginInfo, ReloadResult } from '../../shared/protocol/results.ts';
import type { OperatorScope, TokenScope } from '../../shared/protocol/scopes.ts';
import type { ProfilePaths } from '../../shared/profile.ts';
import type { SecretStore } from '../../shared/secrets/secret-store.ts';
import type { ApiDocumentPart } from './api-doc.ts';
import type { ChannelKind } from './channel.ts';
import type { DomainError } from './errors.ts';
import type { EventBus } from './events.ts';
import type { RegistryTable } from './registry.ts';
import type { Db, Store } from '../store/database.ts';
import type { Migration } from '../store/migrations.ts';

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
 * Who may call a route. `public`: anyone. `{scope}`: the gateway credential or
 * a principal holding the scope. `gateway`: the gateway's own credential (or a
 * token with admin). `plugin`: the handler authenticates the caller itself.
 */
export type RouteAuth = 'public' | 'gateway' | 'plugin' | { scope: TokenScope };

/** Koa's context, with the route's path parameters. */
export type RouteContext = Context & { params: Record<string, string> };

export interface HttpRoute {
  /** GET, POST, ... or * for any method. HEAD falls back to GET. */
  method: string;
  /** A plain path; a segment `:name` matches any one segment (in ctx.params). */
  path: string;
  /** exact (default): the path only; prefix: the path and everything below it, segment by segment. */
  match?: 'exact' | 'prefix';
  auth: RouteAuth;
  /** The route answers {ok: true, ...}; its failures then say ok: false too. */
  envelope?: boolean;
  /** The body of the route's errors when it speaks another convention than the gateway's (the inference API's). */
  errorBody?: (error: DomainError) => unknown;
  handler: (ctx: RouteContext) => unknown | Promise<unknown>;
}

/**
 * A route answered ahead of the HTTP application, on the raw request: for the
 * hottest surfaces (webhook deliveries, hooks), which check their own
 * credentials. Built-in modules only.
 */
export interface FastRoute {
  path: string;
  match?: 'exact' | 'prefix';
  handler: (req: IncomingMessage, res: ServerResponse) => void;
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
  sessionKey?: string;
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
   * Where the handler writes: the transaction its job's outcome commits in,
   * for a handler that only writes to the store (declared `transactional`),
   * else the store itself.
   */
  db: Db;
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

/** The outcome of admitting a connect, decided by the module that owns device pairing. */
export interface Admission {
  role: string;
  scopes: string[];
  deviceId: string;
  /** Set when the device receives its token on this connect; the client stores it. */
  deviceToken?: string;
  via: 'gateway-credential' | 'device-token' | 'invite';
  /** How the device was paired on this connect, if it was. */
  paired?: 'loopback' | 'invite';
}

/** Where a WebSocket connection came from, as admission needs it. */
export interface ConnectionOrigin {
  nonce: string;
  address: string;
  /** Any Forwarded, X-Forwarded-For or X-Real-IP header: it came through a proxy. */
  viaProxy: boolean;
  /** In trusted-proxy mode, the user a trusted proxy vouches for. */
  proxyUser?: string;
  /** The Origin header of a browser's upgrade, when it sent one. */
  browserOrigin?: string;
}

export type AdmitFn = (params: ConnectParams, origin: ConnectionOrigin) => Promise<Admission>;

/** The control plane's connections, as modules see them. */
export interface Connections {
  count(): number;
  clients(): RpcClient[];
  /** Closes the connections of a device at once (revoked or rotated); returns how many. */
  closeDevice(deviceId: string, reason: string): number;
  /** Decides who gets in; exactly one module provides it. */
  admission(admit: AdmitFn): void;
  /** Told when a client is admitted (with a way to push events to it alone) and when it leaves. */
  onAdmitted(listener: (client: RpcClient, params: ConnectParams, push: (event: string, payload: unknown) => void) => void): void;
  onClosed(listener: (client: RpcClient) => void): void;
}

/** The daemon as its modules see it: where it listens and what it is doing. */
export interface DaemonView {
  readonly profile: string;
  readonly paths: ProfilePaths;
  /** The log file the daemon writes, or undefined when it logs to stdout only (under systemd, or --log-file off). */
  readonly logFile: string | undefined;
  /** Receives each log line (JSON) as it is written; returns a function that stops it. */
  onLog(listener: (line: string) => void): () => void;
  readonly instanceId: string;
  readonly version: string;
  readonly startedAt: number;
  readonly port: number;
  readonly bind: { mode: string; host: string; loopback: boolean };
  readonly url: string;
  readonly secretStore: string;
  readiness(): 'starting' | 'ready' | 'stopping';
  /** The readiness checks that fail, by name, with the reason. */
  problems(): Record<string, string>;
  /** What the modules find wrong with a configuration before it is written (see ModuleContext.configCheck). */
  configProblems(next: GatewayConfig): string[];
  /** What the modules documented of their routes, merged. */
  apiDocument(): ApiDocumentPart;
  /** Every module and plugin in the table, and the outcome of the last build. */
  plugins(): { plugins: PluginInfo[]; lastReload: BuildOutcome | null };
  /** Re-reads the configuration and rebuilds the table (plugins included). */
  reload(reason: string): Promise<ReloadResult>;
  /** Applies a configuration the caller has just written. */
  applyConfig(next: GatewayConfig): void;
  /** Tells the daemon and the modules watching a secret that it changed. */
  secretChanged(name: string): Promise<void>;
  stop(reason: string): Promise<void>;
}

export type { BuildOutcome, ReloadResult };

/** A module loaded from outside (a plugin), or the reason it could not be loaded. */
export type Extension = { name: string; source: string; register: RegisterFn } | { name: string; source: string; error: string };

/** Checks whether the daemon can serve: undefined when it can, else the reason it cannot. */
export type ReadinessCheck = () => string | undefined;

/** A built-in module's context: the registration API plus the daemon's shared parts and lifecycle hooks. */
export interface ModuleContext extends RegistrationApi {
  readonly daemon: DaemonView;
  /** The configuration in force (live settings change while the daemon runs). */
  config(): GatewayConfig;
  readonly store: Store;
  readonly secrets: SecretStore;
  readonly events: EventBus;
  readonly connections: Connections;
  /** The table in force: routes, methods, tools, channels and job handlers of every module and plugin. */
  table(): RegistryTable;
  /** The exports of a module this one needs (listed in its `needs`). */
  use<E>(module: GatewayModule<E>): E;
  http: RegistrationApi['http'] & {
    fast(route: FastRoute): void;
    /** A path and everything below it that plugins cannot take. */
    reserve(path: string): void;
    /** Another kind of bearer credential for protected routes. */
    bearer(verifier: BearerVerifier): void;
    /** Who a request that came through the private overlay is, for gateway.auth.allowOverlay. */
    overlayIdentity(identity: (req: IncomingMessage) => Promise<string | undefined>): void;
    /** Authenticates a raw request as protected routes do (throws a DomainError 400/401/403/429). */
    authenticate(req: IncomingMessage): Promise<Principal>;
    /** Documents the routes this module serves in /openapi.json. */
    document(part: ApiDocumentPart): void;
  };
  /** Failed authentications per address and credential kind, shared by every surface. */
  readonly lockout: AuthLockoutView;
  /** The gateway's own credential (token or password), as the daemon holds it. */
  readonly credential: CredentialView;
  readiness: { check(name: string, check: ReadinessCheck): void };
  /**
   * Refuses a configuration change (config set through the daemon) that would
   * leave this module unable to act: each problem names the key and why.
   */
  configCheck(check: (next: GatewayConfig) => string[]): void;
  watch: {
    /** Called after the configuration in force changed (config set, reload). */
    config(listener: (next: GatewayConfig, previous: GatewayConfig) => void): void;
    /** Called when a secret changed (`gateway secrets set`); names may end in `*`. */
    secrets(names: string[], listener: (name: string) => void | Promise<void>): void;
  };
  /** Loads modules from outside (plugins) at each table build. */
  extend(loader: (generation: number) => Promise<Extension[]>): void;
  /** Runs once the daemon listens and is ready, in module order. */
  onStart(hook: () => void | Promise<void>): void;
  /** Runs at shutdown, in reverse module order; the deadline bounds any draining. */
  onStop(hook: (deadline: number) => void | Promise<void>): void;
}

export interface CredentialView {
  readonly mode: 'token' | 'password' | 'trusted-proxy' | 'none';
  /** Whether a connect frame's auth carries the gateway credential. */
  verify(auth: ConnectAuth | undefined): boolean;
  /** Whether an HTTP bearer value is the gateway credential. */
  verifyBearer(value: string | undefined): boolean;
}

export interface AuthLockoutView {
  retryAfterMs(address: string, kind: LockoutKind): number;
  fail(address: string, kind: LockoutKind): number;
  succeed(address: string, kind: LockoutKind): void;
}

/** Kinds of credential counted apart, so a bad device token does not lock out the gateway token. */
export type LockoutKind = 'gateway' | 'device' | 'invite' | 'bearer' | 'hooks';

/** A feature of the daemon: an id, the modules it needs, the tables it owns, and a setup that registers everything it offers. */
export interface GatewayModule<Exports = void> {
  readonly id: string;
  readonly needs?: readonly GatewayModule<unknown>[];
  /** The migrations of the tables this module owns, applied in order before any module is set up; no other module touches them. */
  readonly migrations?: readonly Migration[];
  setup(ctx: ModuleContext): Exports | Promise<Exports>;
}

/** Declares a module with its exports' type inferred from setup. */
export const defineModule = <E>(module: GatewayModule<E>): GatewayModule<E> => module;
