/**
 * The module interface: every feature of the daemon is a module, and a plugin
 * is a module loaded from outside. A module registers what it offers through
 * one context; the table half of that context (routes, methods, tools,
 * channels, job handlers) is all a plugin gets.
 */
import type { IncomingMessage } from 'node:http';
import type { GatewayConfig } from '../../shared/config/types.ts';
import type { ConnectAuth, ConnectParams } from '../../shared/protocol/frames.ts';
import type { BuildOutcome, PluginInfo, ReloadResult } from '../../shared/protocol/results.ts';
import type { ProfilePaths } from '../../shared/profile.ts';
import type { SecretStore } from '../../shared/secrets/secret-store.ts';
import type { ApiDocumentPart } from './api-doc.ts';
import type { EventBus } from './events.ts';
import type { RegistryTable } from './registry.ts';
import type { BearerVerifier, FastRoute, RegisterFn, RegistrationApi, RpcClient } from './registration.ts';
import type { Store } from '../store/database.ts';
import type { Migration } from '../store/migrations.ts';

export type {
  AnyProtocolMethod, BearerVerifier, Budget, FastRoute, HttpRoute, JobContext, JobHandler, JobKind, JobKindOptions, MethodHandler, OwnMethod, Principal,
  ProtocolMethod, RawExchange, RegisterFn, RegistrationApi, RouteAuth, RouteContext, RouteRules, RouteVerifier, RpcClient, ToolContext, ToolDef, WsRoute,
} from './registration.ts';

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
    /** A route answered before the HTTP application loads (FastRoute): set once, never rebuilt at a reload. */
    fast(route: FastRoute): void;
    /** A path and everything below it that plugins cannot take. */
    reserve(path: string): void;
    /** Another kind of bearer credential for protected routes. */
    bearer(verifier: BearerVerifier): void;
    /** Who a request that came through the private overlay is, for gateway.auth.allowOverlay. */
    overlayIdentity(identity: (req: IncomingMessage) => Promise<string | undefined>): void;
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
