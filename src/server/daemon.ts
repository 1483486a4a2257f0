import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import type { Logger } from 'pino';
import type { BindTarget } from '../shared/config/exposure.ts';
import { loadConfig } from '../shared/config/profile-config.ts';
import type { GatewayConfig } from '../shared/config/types.ts';
import {
  acquireDaemonLock, processStartTime, readDaemonRecord, releaseDaemonLock, updateDaemonLock,
  type DaemonRecord,
} from '../shared/daemon-lock.ts';
import { httpUrl } from '../shared/listen.ts';
import type { ProfilePaths } from '../shared/profile.ts';
import type { ReloadResult } from '../shared/protocol/results.ts';
import type { SecretStore } from '../shared/secrets/secret-store.ts';
import { gatewayVersion } from '../shared/version.ts';
import { GatewayCredential, loadGatewayCredential } from './auth/gateway-credential.ts';
import { HttpAuthenticator } from './auth/http-auth.ts';
import { AuthLockout, RequestBudget } from './auth/throttle.ts';
import * as builtins from './compose.ts';
import { createHttpServer, listen } from './http/server.ts';
import type { Readiness } from './http/probes.ts';
import { ConnectionsHub } from './kernel/connections.ts';
import { EventBus } from './kernel/events.ts';
import { ModuleHost } from './kernel/host.ts';
import type { DaemonView, GatewayModule } from './kernel/module.ts';
import { originRefusal } from './auth/browser-origin.ts';
import type { DaemonLogger } from './logger.ts';
import { Checkpointer } from './store/checkpointer.ts';
import { openStore } from './store/open.ts';
import type { AuditFields, Store } from './store/database.ts';
import { ControlPlane } from './ws/control-plane.ts';
import { routeUpgrade } from './ws/routes.ts';

/** How often a running daemon checks that its profile's lock is still its own (one read of a small file). */
const LOCK_CHECK_MS = 5000;

/** The modules of a daemon started from the command line. */
export const BUILTIN_MODULES: readonly GatewayModule<unknown>[] = Object.values(builtins) as GatewayModule<unknown>[];

export interface DaemonParts {
  paths: ProfilePaths;
  config: GatewayConfig;
  bind: BindTarget;
  /** 0 listens on a free port (the in-process test harness). */
  port: number;
  log: DaemonLogger;
  secrets: SecretStore;
  /** The modules to compose (default: the built-in ones). */
  modules?: readonly GatewayModule<unknown>[];
  /** Whether to hold the profile's lock (daemon.json); the in-process harness runs without it. */
  lock?: boolean;
  overrides?: { port?: number; bind?: string };
}

/**
 * A running gateway daemon: one per profile, holding the profile's lock. It
 * keeps the lifecycle only (lock, compose, listen, ready, reload, drain,
 * stop); every feature is a module of the composition.
 */
export class Daemon {
  readiness: Readiness = 'starting';
  readonly instanceId = randomUUID();
  readonly startedAt = Date.now();
  config: GatewayConfig;
  port: number;
  record?: DaemonRecord;
  host?: ModuleHost;
  private server?: Server;
  private controlPlane?: ControlPlane;
  private store?: Store;
  private checkpointer?: Checkpointer;
  private stopping?: Promise<void>;
  private resolveStopped!: () => void;
  readonly stopped = new Promise<void>((resolve) => { this.resolveStopped = resolve; });

  readonly paths: ProfilePaths;
  readonly bind: BindTarget;
  readonly log: DaemonLogger;
  readonly secrets: SecretStore;
  readonly credential: GatewayCredential;
  private readonly parts: DaemonParts;

  constructor(parts: DaemonParts) {
    this.parts = parts;
    this.paths = parts.paths;
    this.config = parts.config;
    this.bind = parts.bind;
    this.port = parts.port;
    this.log = parts.log;
    this.secrets = parts.secrets;
    this.credential = new GatewayCredential(parts.config.gateway.auth.mode, undefined, undefined);
  }

  get logger(): Logger {
    return this.log.logger;
  }

  get logFile(): string | undefined {
    return this.log.file ? this.paths.log : undefined;
  }

  get url(): string {
    return httpUrl(this.bind.host, this.port);
  }

  get uptimeMs(): number {
    return Date.now() - this.startedAt;
  }

  /** Takes the lock, prepares state, composes the modules and listens; throws DaemonAlreadyRunning when another daemon holds the profile. */
  async start(): Promise<void> {
    const record: DaemonRecord = {
      pid: process.pid,
      startTime: processStartTime(process.pid) ?? String(this.startedAt),
      instanceId: this.instanceId,
      profile: this.paths.name,
      port: this.port,
      bind: this.bind.mode,
      host: this.bind.host,
      version: gatewayVersion(),
      startedAt: this.startedAt,
      overrides: this.parts.overrides ?? {},
    };
    if (this.parts.lock !== false) {
      acquireDaemonLock(this.paths, record);
      this.record = record;
    }
    this.logger.info({ port: this.port, host: this.bind.host, bind: this.bind.mode, version: record.version, secretStore: this.secrets.backend }, 'daemon starting');

    await this.loadCredentials();
    this.store = await openStore({ paths: this.paths, config: this.config, secrets: this.secrets, instanceId: this.instanceId, logger: this.logger });
    if (!this.store.dialect.shared) this.checkpointer = new Checkpointer(this.store, { path: this.paths.db, synchronous: this.config.store.synchronous, logger: this.logger });
    const store = this.store;
    store.onUnexpected = (error, what) => this.logger.error({ err: error }, `${what} could not be stored`);
    const audit = (kind: string, fields: AuditFields) => store.audit(kind, fields);
    const lockout = new AuthLockout(this.config.gateway.auth.rateLimit);
    const authenticator = new HttpAuthenticator({ config: () => this.config, credential: this.credential, lockout, audit });
    const events = new EventBus();
    const hub = new ConnectionsHub();
    const host = new ModuleHost(this.parts.modules ?? BUILTIN_MODULES, {
      daemon: this.view(), config: () => this.config, store, secrets: this.secrets, events, connections: hub, lockout,
      credential: this.credential, logger: this.logger,
      addBearer: (verifier) => authenticator.addVerifier(verifier),
      setOverlayIdentity: (identity) => authenticator.setOverlayIdentity(identity),
    });
    this.host = host;
    await host.setup();
    await host.build(true);

    const budget = new RequestBudget(this.config.gateway.rateLimit.max, this.config.gateway.rateLimit.windowMs);
    this.server = createHttpServer({
      logger: this.logger, budget, authenticator, table: () => host.table, fastRoute: (path) => host.fastRoute(path),
      config: () => this.config, exposed: !this.bind.loopback, readiness: () => this.readiness, problems: () => host.problems(),
      detail: () => ({ profile: this.paths.name, version: gatewayVersion(), instanceId: this.instanceId, uptimeMs: this.uptimeMs, connections: hub.count() }),
    });
    this.controlPlane = new ControlPlane({
      logger: this.logger, table: () => host.table, hub, events, lockout, audit,
      proxyUser: (request) => authenticator.proxyUser(request),
      routeUpgrade: routeUpgrade(() => host.table, authenticator, this.logger),
      server: { version: record.version, instanceId: this.instanceId, profile: this.paths.name },
      accepting: () => this.readiness !== 'stopping',
      originRefusal: (request) => originRefusal(request.headers.origin, request.headers.host, this.config.gateway.controlUi.allowedOrigins),
    });
    this.controlPlane.attach(this.server);
    this.port = await listen(this.server, { port: this.port, bind: this.bind, paths: this.paths });

    if (this.record) {
      this.record = { ...this.record, port: this.port, readyAt: Date.now() };
      updateDaemonLock(this.paths, this.record);
    }
    this.readiness = 'ready';
    await host.start();
    this.checkpointer?.watchWal();
    this.watchLock();
    void store.audit('daemon.start', { detail: { port: this.port, bind: this.bind.mode } });
    this.logger.info({ url: this.url, ms: Date.now() - this.startedAt }, 'daemon ready');
  }

  /**
   * A daemon whose profile was removed under it (its folder deleted, or its
   * lock taken by another instance) stops instead of running on unseen: no
   * command can reach or stop it any more, and a new daemon of the profile
   * could run beside it.
   */
  private watchLock(): void {
    if (!this.record) return;
    const timer = setInterval(() => {
      let held: boolean;
      try {
        const record = readDaemonRecord(this.paths);
        held = record !== 'corrupt' && record?.instanceId === this.instanceId;
      } catch {
        held = false;
      }
      if (held) return;
      clearInterval(timer);
      this.logger.error({ lock: this.paths.lock }, 'the profile\'s lock is gone or held by another daemon (was the profile removed?): stopping');
      void this.stop('profile removed');
    }, LOCK_CHECK_MS);
    timer.unref();
    void this.stopped.then(() => clearInterval(timer));
  }

  /** The daemon as its modules see it. */
  private view(): DaemonView {
    const daemon = this;
    return {
      profile: this.paths.name,
      paths: this.paths,
      logFile: this.logFile,
      onLog: (listener) => this.log.tap(listener),
      instanceId: this.instanceId,
      version: gatewayVersion(),
      startedAt: this.startedAt,
      get port() { return daemon.port; },
      bind: this.bind,
      get url() { return daemon.url; },
      secretStore: this.secrets.backend,
      readiness: () => this.readiness,
      problems: () => this.host?.problems() ?? {},
      configProblems: (next) => this.host?.configProblems(next) ?? [],
      apiDocument: () => this.host!.apiDocument(),
      plugins: () => ({ plugins: this.host?.plugins ?? [], lastReload: this.host?.lastBuild ?? null }),
      reload: (reason) => this.reload(reason),
      applyConfig: (next) => this.applyConfig(next),
      secretChanged: (name) => this.secretChanged(name),
      stop: (reason) => this.stop(reason),
    };
  }

  private loadCredentials(): Promise<void> {
    return loadGatewayCredential(this.credential, { mode: this.config.gateway.auth.mode, secrets: this.secrets, profile: this.paths.name, logger: this.logger });
  }

  /** A secret changed: the gateway credential is read again here, the rest by the modules watching it. */
  async secretChanged(name: string): Promise<void> {
    if (name === 'gateway.token' || name === 'gateway.password') await this.loadCredentials().catch(() => undefined);
    await this.host?.secretChanged(name);
  }

  /**
   * Re-reads the configuration (live settings apply at once) and rebuilds the
   * table of routes, methods, tools, channels and job handlers, plugins
   * included; the process and its connections stay. A plugin that fails
   * keeps the previous table.
   */
  async reload(reason: string): Promise<ReloadResult> {
    this.logger.info({ reason }, 'reloading');
    let config: { ok: boolean; error?: string } = { ok: true };
    try {
      this.applyConfig(loadConfig(this.paths).effective);
    } catch (error) {
      config = { ok: false, error: (error as Error).message };
      this.logger.error({ error: config.error }, 'reload kept the previous configuration');
    }
    const plugins = await this.host!.build(false);
    return { ok: config.ok && plugins.ok, pid: process.pid, config, plugins };
  }

  /** Applies a change of the live settings; others wait for a restart. */
  applyConfig(next: GatewayConfig): void {
    const previous = this.config;
    this.config = next;
    const level = next.log.level;
    if (this.logger.level !== level && this.logger.level !== 'debug') this.logger.level = level;
    this.host?.configChanged(next, previous);
  }

  /** Stops accepting, closes WebSockets with 1001, drains work up to the bound, releases the lock. */
  stop(reason: string): Promise<void> {
    this.stopping ??= this.shutdown(reason);
    return this.stopping;
  }

  private async shutdown(reason: string): Promise<void> {
    this.logger.info({ reason }, 'daemon stopping');
    this.readiness = 'stopping';
    const closed = new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
    this.controlPlane?.close();
    this.server?.closeIdleConnections();
    const { drainTimeoutMs } = this.config.gateway;
    const deadline = setTimeout(() => {
      this.controlPlane?.terminateAll();
      this.server?.closeAllConnections();
    }, Math.min(drainTimeoutMs, 5000)).unref();
    // Singletons first: another daemon of the gateway takes them over while this one drains.
    await this.store?.coordinator?.close();
    await this.host?.stop(Date.now() + drainTimeoutMs);
    await closed;
    clearTimeout(deadline);
    await this.checkpointer?.stop();
    await this.teardown();
    this.logger.info({ uptimeMs: this.uptimeMs }, 'daemon stopped');
    this.log.logger.flush?.();
    this.resolveStopped();
  }

  /** Releases what start-up took; safe to call on a half-started daemon. */
  async teardown(): Promise<void> {
    await this.store?.coordinator?.close();
    await this.store?.close();
    if (this.record) releaseDaemonLock(this.paths, this.instanceId);
  }

  /** Forced exit on a second signal: release the lock and go. */
  abort(): void {
    this.logger.warn('second signal: exiting at once');
    try {
      void this.store?.close();
    } finally {
      if (this.record) releaseDaemonLock(this.paths, this.instanceId);
    }
  }
}
