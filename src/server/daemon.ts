import { randomBytes, randomUUID } from 'node:crypto';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { GatewayError } from '../shared/errors.ts';
import { ExitCode } from '../shared/exit-codes.ts';
import { assertExposure, type BindTarget } from '../shared/config/exposure.ts';
import { loadConfig } from '../shared/config/profile-config.ts';
import type { GatewayConfig } from '../shared/config/types.ts';
import {
  acquireDaemonLock, DaemonAlreadyRunning, inspectDaemon, processStartTime, releaseDaemonLock, updateDaemonLock,
  type DaemonRecord,
} from '../shared/daemon-lock.ts';
import type { DaemonMessage } from '../shared/daemon-messages.ts';
import { httpUrl, resolveListen } from '../shared/listen.ts';
import { profilePaths, type ProfilePaths } from '../shared/profile.ts';
import { ensureProfile } from '../shared/profile-setup.ts';
import { listProfileNames } from '../shared/profiles.ts';
import { openSecretStore, secretFromEnv, type SecretStore } from '../shared/secrets/secret-store.ts';
import { gatewayVersion } from '../shared/version.ts';
import { GatewayCredential } from './auth/gateway-credential.ts';
import { answerProbe, type ProbeOptions, type Readiness } from './http/probes.ts';
import { WebhookIngress } from './http/webhook-ingress.ts';
import { HttpAuthenticator } from './auth/http-auth.ts';
import { TokenStore } from './tokens/token-store.ts';
import { JobQueue } from './jobs/job-queue.ts';
import { JobHandlers } from './jobs/job-handlers.ts';
import { JobWorker } from './jobs/worker.ts';
import { registerJobMethods } from './jobs/job-methods.ts';
import { registerGithubHandlers } from './webhooks/github-handlers.ts';
import { registerTokenMethods, tokenVerifier } from './tokens/token-methods.ts';
import { jwtVerifier, serviceKeyVerifier } from './auth/external-credentials.ts';
import { AuthLockout, RequestBudget } from './auth/throttle.ts';
import { createLogger, type DaemonLogger } from './logger.ts';
import { Store } from './store/database.ts';
import { Checkpointer } from './store/checkpointer.ts';
import { ControlPlane } from './ws/control-plane.ts';
import { registerCoreMethods } from './ws/core-methods.ts';
import { MethodTable } from './ws/method-table.ts';
import { NodeRegistry } from './nodes/node-registry.ts';
import { registerNodeMethods } from './nodes/node-methods.ts';
import { admit } from './ws/handshake.ts';
import { DeviceRegistry } from './pairing/device-registry.ts';
import { registerDeviceMethods, requestView } from './pairing/device-methods.ts';
import { builtinChannels } from './channels/builtin.ts';
import { registerChannelMethods } from './channels/channel-methods.ts';
import { DmPairing } from './channels/dm-pairing.ts';
import { ChannelManager } from './channels/manager.ts';
import { SessionStore } from './channels/sessions.ts';
import { PluginHost, type ReloadOutcome } from './plugins/host.ts';
import { staticFolder } from './plugins/static-files.ts';
import { pluginUpgrade } from './plugins/ws-routes.ts';
import { builtinTools } from './tools/builtin-tools.ts';
import type { HooksIngress } from './hooks/hooks-ingress.ts';
import { hookPathRest, hooksBase } from './hooks/hooks-path.ts';
import { compileToolSchema, loadSchemaCompiler, ToolRunner } from './tools/tool-runner.ts';
import { METHOD_SCOPES } from '../shared/protocol/methods.ts';
import { join } from 'node:path';

/**
 * node:http through getBuiltinModule, not an ESM import: importing it as a
 * module reads every export, and its lazy WebSocket getters load all of
 * undici (megabytes of memory and milliseconds of start-up) for nothing.
 */
const { createServer } = process.getBuiltinModule('node:http');

const PRUNE_JOB = 'store.prune';
const PRUNE_INTERVAL_MS = 6 * 60 * 60_000;

/** Lets tests observe a daemon between listening and ready (a real start-up is too quick to catch). */
function testReadyDelay(): Promise<void> {
  const ms = Number(process.env.GATEWAY_TEST_READY_DELAY_MS);
  return ms > 0 ? new Promise((resolve) => setTimeout(resolve, ms)) : Promise.resolve();
}

export interface DaemonOptions {
  profile: string;
  port?: number;
  bind?: string;
  verbose?: boolean;
  /** Called once with the outcome of start-up (ready, already running, or failed). */
  report: (message: DaemonMessage) => void;
  /** Receives the daemon as soon as it exists, so signals can stop it. */
  onCreated?: (daemon: Daemon) => void;
}

/** A running gateway daemon: one per profile, holding the profile's lock. */
export class Daemon {
  readiness: Readiness = 'starting';
  readonly instanceId = randomUUID();
  readonly startedAt = Date.now();
  config: GatewayConfig;
  private server?: Server;
  private controlPlane?: ControlPlane;
  private store?: Store;
  private budget?: RequestBudget;
  private authenticator?: HttpAuthenticator;
  private queue?: JobQueue;
  private handlers?: JobHandlers;
  private worker?: JobWorker;
  private webhookBudget?: RequestBudget;
  private pruneTimer?: NodeJS.Timeout;
  private channels?: ChannelManager;
  private checkpointer?: Checkpointer;
  private sessions?: SessionStore;
  private lockout?: AuthLockout;
  /** The hooks ingress token, read once and refreshed when it changes. */
  hooksToken?: string;
  plugins?: PluginHost;
  tools?: ToolRunner;
  /** The webhook secret and, during rotation, the previous one: read once, refreshed when they change. */
  webhookSecrets: string[] = [];
  private tokens?: TokenStore;
  private stopping?: Promise<void>;
  private resolveStopped!: () => void;
  readonly stopped = new Promise<void>((resolve) => { this.resolveStopped = resolve; });
  record?: DaemonRecord;

  readonly paths: ProfilePaths;
  readonly bind: BindTarget;
  readonly port: number;
  readonly log: DaemonLogger;
  readonly secrets: SecretStore;
  readonly credential: GatewayCredential;
  readonly overrides: { port?: number; bind?: string };

  private constructor(parts: {
    paths: ProfilePaths; config: GatewayConfig; bind: BindTarget; port: number; log: DaemonLogger;
    secrets: SecretStore; credential: GatewayCredential; overrides: { port?: number; bind?: string };
  }) {
    this.paths = parts.paths;
    this.config = parts.config;
    this.bind = parts.bind;
    this.port = parts.port;
    this.log = parts.log;
    this.secrets = parts.secrets;
    this.credential = parts.credential;
    this.overrides = parts.overrides;
  }

  get logger(): Logger {
    return this.log.logger;
  }

  get url(): string {
    return httpUrl(this.bind.host, this.port);
  }

  get uptimeMs(): number {
    return Date.now() - this.startedAt;
  }

  get connections(): number {
    return this.controlPlane?.size ?? 0;
  }

  /**
   * Starts the daemon and resolves with its exit code once it has stopped (or
   * failed to start). Start-up failures are reported, never thrown.
   */
  static async run(options: DaemonOptions): Promise<number> {
    const paths = profilePaths(options.profile);
    let daemon: Daemon | undefined;
    try {
      const setup = await ensureProfile(paths);
      const { effective: config } = loadConfig(paths);
      const { port, bind } = resolveListen(paths.name, config, { port: options.port, bind: options.bind });
      assertExposure(config, bind);
      const log = createLogger({ path: paths.log, level: options.verbose ? 'debug' : config.log.level, maxBytes: config.log.maxBytes, maxFiles: config.log.maxFiles, profile: paths.name });
      if (setup.warning) log.logger.warn(setup.warning);
      const secrets = openSecretStore(paths, setup.backend);
      const credential = new GatewayCredential(config.gateway.auth.mode, undefined, undefined);
      daemon = new Daemon({ paths, config, bind, port, log, secrets, credential, overrides: { port: options.port, bind: options.bind } });
      options.onCreated?.(daemon);
      await daemon.start();
    } catch (error) {
      if (error instanceof DaemonAlreadyRunning) {
        daemon?.logger.info({ pid: error.record.pid }, 'another daemon holds this profile');
        options.report({ type: 'running', pid: error.record.pid, port: error.record.port });
        return ExitCode.failure;
      }
      const failure = error instanceof GatewayError ? error : new GatewayError((error as Error).message, { cause: error });
      daemon?.logger.error({ err: error }, 'start-up failed');
      await daemon?.teardown();
      options.report({ type: 'error', message: failure.message, hints: failure.hints, exitCode: failure.exitCode });
      return failure.exitCode;
    }
    options.report({ type: 'ready', pid: process.pid, port: daemon.port, host: daemon.bind.host, url: daemon.url, secretStore: daemon.secrets.backend });
    await daemon.stopped;
    return ExitCode.ok;
  }

  /** Takes the lock, prepares state and listens; throws DaemonAlreadyRunning when another daemon holds the profile. */
  private async start(): Promise<void> {
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
      overrides: this.overrides,
    };
    acquireDaemonLock(this.paths, record);
    this.record = record;
    this.logger.info({ port: this.port, host: this.bind.host, bind: this.bind.mode, version: record.version, secretStore: this.secrets.backend }, 'daemon starting');

    await this.loadCredentials();
    await this.loadWebhookSecrets();
    await this.loadApiSecrets();
    await this.loadHooksToken();
    this.store = new Store({ path: this.paths.db, synchronous: this.config.store.synchronous });
    this.checkpointer = new Checkpointer(this.store, { path: this.paths.db, synchronous: this.config.store.synchronous, logger: this.logger });

    const store = this.store;
    const audit = (kind: string, fields: Parameters<Store['audit']>[1]) => store.audit(kind, fields);
    const devices = new DeviceRegistry(store);
    const lockout = new AuthLockout(this.config.gateway.auth.rateLimit);
    this.lockout = lockout;
    this.budget = new RequestBudget(this.config.gateway.rateLimit.max, this.config.gateway.rateLimit.windowMs);
    const tokens = new TokenStore(store);
    this.tokens = tokens;
    this.authenticator = new HttpAuthenticator({
      config: () => this.config, credential: this.credential, lockout, audit,
      verifiers: [tokenVerifier(tokens), serviceKeyVerifier(() => this.apiSecrets.serviceKey), jwtVerifier(() => this.config, () => this.apiSecrets.jwt)],
    });
    const methods = new MethodTable();
    registerCoreMethods(methods, this);
    registerDeviceMethods(methods, { devices, store, controlPlane: () => this.controlPlane! });
    registerTokenMethods(methods, { tokens, audit, defaultExpiryDays: () => this.config.api.tokens.defaultExpiryDays });
    const queue = new JobQueue(store);
    this.queue = queue;
    this.handlers = new JobHandlers();
    registerGithubHandlers(this.handlers);
    // A mail push names the mailbox and the point to sync from; the job's result records it.
    this.handlers.handle('gmail.push', (payload) => payload);
    const pairing = new DmPairing(store);
    this.handlers.handle(PRUNE_JOB, () => ({
      ...queue.prune(this.config.store.retentionDays),
      pairingRequests: pairing.prune(this.config.store.retentionDays * 86_400_000),
      toolInvocations: this.tools?.prune() ?? 0,
    }));
    registerJobMethods(methods, queue);
    this.worker = new JobWorker({ queue, handlers: this.handlers, store, logger: this.logger, concurrency: this.config.jobs.concurrency });
    this.webhookBudget = new RequestBudget(this.config.gateway.rateLimit.webhooksMax, this.config.gateway.rateLimit.windowMs);
    const nodes = new NodeRegistry(() => this.config.gateway.nodes);
    registerNodeMethods(methods, nodes);
    const sessions = new SessionStore(store);
    this.sessions = sessions;
    const channelRegistry = builtinChannels();
    this.channels = new ChannelManager({
      registry: channelRegistry, config: () => this.config, secret: (name) => this.secrets.get(name), logger: this.logger,
      pairing, sessions, emit: (event, payload, scope) => this.controlPlane?.broadcast(event, payload, scope),
    });
    registerChannelMethods(methods, { channels: this.channels, pairing, sessions, store });

    const handlers = this.handlers;
    this.tools = new ToolRunner({ table: () => plugins.table, config: () => this.config, store, logger: this.logger });
    const plugins = new PluginHost({
      builtins: [
        builtinTools({
          queue, sessions, channels: this.channels, handles: (kind) => handlers.find(kind) !== undefined,
          status: () => this.statusSummary(), reload: () => this.reload('tool gateway.reload'),
        }),
        staticFolder('canvas', () => this.config.plugins.canvas?.root ?? join(this.paths.dir, 'canvas')),
        staticFolder('a2ui', () => this.config.plugins.a2ui?.root ?? join(this.paths.dir, 'a2ui')),
      ],
      specs: () => this.config.plugins.load,
      profileDir: this.paths.dir,
      logger: this.logger,
      limits: {
        reservedMethod: (name) => Object.hasOwn(METHOD_SCOPES, name),
        reservedJobKind: (kind) => handlers.own(kind),
        reservedChannel: (id) => channelRegistry.own(id),
        reservedPaths: [this.config.hooks.path],
        prepare: loadSchemaCompiler,
        compileSchema: (schema) => void compileToolSchema(schema),
      },
    });
    this.plugins = plugins;
    methods.fallback = (name) => {
      const entry = plugins.table.methods.get(name);
      return entry ? { scope: entry.value.scope, handler: entry.value.handler } : undefined;
    };
    handlers.fallback = (kind) => plugins.table.jobs.get(kind)?.value;
    channelRegistry.fallback = { get: (id) => plugins.table.channels.get(id)?.value, ids: () => [...plugins.table.channels.keys()] };
    await plugins.start();
    this.controlPlane = new ControlPlane({
      logger: this.logger,
      methods,
      lockout,
      audit,
      proxyUser: (request) => this.authenticator!.proxyUser(request),
      onAdmitted: (client, params, push) => {
        if (client.role !== 'node') return;
        const node = nodes.add({
          deviceId: client.deviceId, connectionId: client.connectionId, clientId: client.clientId, platform: params.client.platform,
          address: client.address, caps: params.caps ?? [], declared: params.commands ?? [], permissions: params.permissions ?? {},
          connectedAt: Date.now(), push,
        });
        this.logger.info({ node: node.clientId, device: node.deviceId, commands: node.commands }, 'node connected');
      },
      onClosed: (client) => nodes.remove(client.connectionId),
      admit: (params, origin) => admit(params, origin, {
        credential: this.credential,
        devices,
        audit,
        onPairingRequested: (request) => this.controlPlane?.broadcast('device.pair.requested', requestView(request), 'operator.pairing'),
      }),
      pluginUpgrade: pluginUpgrade(() => plugins.table, this.authenticator, this.logger),
      server: { version: record.version, instanceId: this.instanceId, profile: this.paths.name },
      accepting: () => this.readiness !== 'stopping',
    });
    this.server = this.createServer();
    this.controlPlane.attach(this.server);
    await this.listen(this.server);
    await testReadyDelay();

    this.record = { ...record, readyAt: Date.now() };
    updateDaemonLock(this.paths, this.record);
    this.readiness = 'ready';
    this.worker.start();
    this.schedulePrune();
    await this.channels.start();
    this.checkpointer.watchWal();
    this.store.audit('daemon.start', { detail: { port: this.port, bind: this.bind.mode } });
    this.logger.info({ url: this.url, ms: this.record.readyAt! - this.startedAt }, 'daemon ready');
  }

  /**
   * Probes and webhook deliveries are answered here, ahead of everything. The Koa application behind
   * every other route is loaded on the first request that needs it, so a
   * daemon that only serves probes and the control plane stays lean.
   */
  private createServer(): Server {
    let handler: Promise<(req: IncomingMessage, res: ServerResponse) => Promise<void>> | undefined;
    const loadHandler = async () => {
      const [{ createHttpApp }, { tokenRoutes }, { jobRoutes }, { apiContractRoutes }, { toolRoutes }, { pluginRoutesLayer }] = await Promise.all([
        import('./http/app.ts'), import('./http/routes/tokens.ts'), import('./http/routes/jobs.ts'), import('./http/routes/api-contract.ts'),
        import('./http/routes/tools.ts'), import('./http/plugin-routes.ts'),
      ]);
      const surfaces = [
        apiContractRoutes(),
        jobRoutes({ authenticator: this.authenticator!, queue: this.queue! }),
        tokenRoutes({
          authenticator: this.authenticator!, tokens: this.tokens!, audit: (kind, fields) => this.audit(kind, fields),
          maxBodyBytes: () => this.config.gateway.http.maxBodyBytes, defaultExpiryDays: () => this.config.api.tokens.defaultExpiryDays,
        }),
        toolRoutes({ authenticator: this.authenticator!, tools: this.tools!, maxBodyBytes: () => this.config.gateway.http.maxBodyBytes }),
      ];
      return createHttpApp({
        logger: this.logger, budget: this.budget!, surfaces,
        after: [pluginRoutesLayer(() => this.plugins!.table, this.authenticator!)],
        envelopePaths: new Set(['/tools/invoke']),
      }).callback();
    };
    const probes: ProbeOptions = {
      readiness: () => this.readiness,
      exposed: !this.bind.loopback,
      presentsCredential: (req) => req.headers.authorization !== undefined
        || (this.config.gateway.auth.mode === 'trusted-proxy' && req.headers[this.config.gateway.auth.trustedProxy.userHeader] !== undefined),
      budget: (address) => this.budget!.spend(`addr:${address}`),
      detail: async (req) => {
        await this.authenticator!.authenticate(req);
        return { profile: this.paths.name, version: gatewayVersion(), instanceId: this.instanceId, uptimeMs: this.uptimeMs, connections: this.connections };
      },
    };
    const webhooks = new WebhookIngress({
      store: this.store!, queue: this.queue!, budget: this.webhookBudget!, logger: this.logger, secrets: () => this.webhookSecrets,
    });
    // The hooks ingress loads on its first request: most daemons never receive one.
    let hooks: Promise<HooksIngress> | undefined;
    const loadHooks = () => import('./hooks/hooks-ingress.ts').then(({ HooksIngress: Ingress }) => new Ingress({
      config: () => this.config, token: () => this.hooksToken, lockout: this.lockout!, queue: this.queue!, channels: this.channels!,
      sessions: this.sessions!, store: this.store!, logger: this.logger, emit: (event, payload, scope) => this.controlPlane?.broadcast(event, payload, scope),
    }));
    const loadFailed = (res: ServerResponse, what: string, error: unknown) => {
      this.logger.error({ err: error }, `the ${what} failed to load`);
      res.writeHead(500, { 'content-type': 'application/json; charset=utf-8' }).end(JSON.stringify({ error: 'internal', message: `The gateway could not load its ${what}; see its log.`, statusCode: 500 }));
    };
    return createServer({ keepAliveTimeout: 5000, requestTimeout: 30_000, headersTimeout: 10_000 }, (req, res) => {
      if (answerProbe(req, res, probes)) return;
      if (webhooks.matches(req)) return webhooks.handle(req, res);
      if (hookPathRest(hooksBase(this.config.hooks.path), req.url) !== undefined) {
        hooks ??= loadHooks();
        hooks.then((ingress) => ingress.handle(req, res), (error: unknown) => loadFailed(res, 'hooks ingress', error));
        return;
      }
      handler ??= loadHandler();
      handler.then((handle) => handle(req, res), (error: unknown) => loadFailed(res, 'HTTP application', error));
    });
  }

  private listen(server: Server): Promise<void> {
    return new Promise((resolve, reject) => {
      server.once('error', (error: NodeJS.ErrnoException) => {
        if (error.code === 'EADDRINUSE') reject(this.portInUse());
        else if (error.code === 'EACCES') reject(new GatewayError(`Not allowed to listen on port ${this.port} of ${this.bind.host} (profile "${this.paths.name}").`, { hints: ['choose a port above 1023: gateway config set gateway.port <port>'] }));
        else if (error.code === 'EADDRNOTAVAIL') reject(new GatewayError(`${this.bind.host} is not an address of this host (profile "${this.paths.name}").`, { exitCode: ExitCode.invalidConfig }));
        else reject(error);
      });
      server.listen({ port: this.port, host: this.bind.host, backlog: 511 }, () => resolve());
    });
  }

  private portInUse(): GatewayError {
    let owner = 'another process';
    for (const name of listProfileNames(this.paths.home)) {
      if (name === this.paths.name) continue;
      const found = inspectDaemon(profilePaths(name, this.paths.home));
      if ((found.state === 'running' || found.state === 'starting') && found.record.port === this.port) {
        owner = `profile "${name}" (pid ${found.record.pid})`;
        break;
      }
    }
    return new GatewayError(`Port ${this.port} on ${this.bind.host} is already in use by ${owner}; profile "${this.paths.name}" cannot listen there.`, {
      code: 'PORT_IN_USE',
      hints: [`gateway start --profile ${this.paths.name} --port <port>`, `gateway config set gateway.port <port> --profile ${this.paths.name}`],
    });
  }

  /** The gateway token is made on first start by the lock holder; environment variables override stored values. */
  async loadCredentials(): Promise<void> {
    const mode = this.config.gateway.auth.mode;
    let token = secretFromEnv('gateway.token');
    if (!token && mode !== 'none') {
      token = await this.secrets.get('gateway.token');
      if (!token) {
        token = randomBytes(32).toString('base64url');
        await this.secrets.set('gateway.token', token);
        this.logger.info('generated the gateway token');
      }
    }
    const password = secretFromEnv('gateway.password') ?? (mode === 'password' ? await this.secrets.get('gateway.password') : undefined);
    if (mode === 'password' && !password) {
      throw new GatewayError('gateway.auth.mode is password, but no password is set.', {
        exitCode: ExitCode.invalidConfig,
        hints: [`gateway secrets set gateway.password --profile ${this.paths.name}   # reads it from stdin`, 'or set GATEWAY_PASSWORD'],
      });
    }
    this.credential.update(token, password);
  }

  /** Writes an audit event; never give it a secret. */
  audit(kind: string, fields: Parameters<Store['audit']>[1]): void {
    this.store?.audit(kind, fields);
  }

  /** The service key and the JWT secret, read once and refreshed when they change. */
  apiSecrets: { serviceKey?: string; jwt?: string } = {};

  async loadApiSecrets(): Promise<void> {
    this.apiSecrets = { serviceKey: await this.secrets.get('api.serviceKey'), jwt: await this.secrets.get('api.jwt.secret') };
  }

  /** Reads the hooks token: the environment first, then the store; one equal to the gateway token is warned about. */
  async loadHooksToken(): Promise<void> {
    this.hooksToken = secretFromEnv('hooks.token') ?? (await this.secrets.get('hooks.token'));
    if (this.hooksToken && this.config.gateway.auth.mode !== 'none' && this.credential.verifyBearer(this.hooksToken)) {
      this.logger.warn('hooks.token equals the gateway token; give hooks a token of their own: gateway hooks token set');
    }
  }

  /** Reads the webhook secrets into memory: the environment first, then the store. */
  async loadWebhookSecrets(): Promise<void> {
    const current = secretFromEnv('webhooks.github.secret') ?? (await this.secrets.get('webhooks.github.secret'));
    const previous = await this.secrets.get('webhooks.github.secret.previous');
    this.webhookSecrets = [current, previous].filter((value): value is string => Boolean(value));
  }

  /** Retention runs as a job: at start, then every PRUNE_INTERVAL_MS. */
  private schedulePrune(): void {
    this.queue!.enqueue(PRUNE_JOB, null, { maxAttempts: 1 });
    this.pruneTimer = setInterval(() => this.queue!.enqueue(PRUNE_JOB, null, { maxAttempts: 1 }), PRUNE_INTERVAL_MS);
    this.pruneTimer.unref();
  }

  /** What `gateway.status` (the tool) and the status RPC share beyond the basics. */
  statusSummary(): Record<string, unknown> {
    return {
      profile: this.paths.name, version: gatewayVersion(), pid: process.pid, uptimeMs: this.uptimeMs, url: this.url,
      channels: this.channels?.status() ?? [],
      plugins: this.pluginSummary(),
    };
  }

  pluginSummary() {
    const plugins = this.plugins?.plugins ?? [];
    return {
      loaded: plugins.filter((p) => p.status === 'loaded' && !p.builtin).map((p) => p.name),
      errors: plugins.filter((p) => p.status === 'error').map((p) => ({ plugin: p.name, error: p.error! })),
      lastReload: this.plugins?.lastReload ?? null,
    };
  }

  /**
   * Re-reads the configuration (live settings apply at once) and the plugins,
   * swapping the route, method and tool tables; the process and its
   * connections stay. A plugin that fails keeps the previous table.
   */
  async reload(reason: string): Promise<{ ok: boolean; pid: number; config: { ok: boolean; error?: string }; plugins: ReloadOutcome }> {
    this.logger.info({ reason }, 'reloading');
    let config: { ok: boolean; error?: string } = { ok: true };
    try {
      this.applyConfig(loadConfig(this.paths).effective);
    } catch (error) {
      config = { ok: false, error: (error as Error).message };
      this.logger.error({ error: config.error }, 'reload kept the previous configuration');
    }
    const plugins = await this.plugins!.reload();
    return { ok: config.ok && plugins.ok, pid: process.pid, config, plugins };
  }

  /** Applies a change of the live settings; others wait for a restart. */
  applyConfig(next: GatewayConfig): void {
    this.config = next;
    const level = next.log.level;
    if (this.logger.level !== level && this.logger.level !== 'debug') this.logger.level = level;
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
    const deadline = setTimeout(() => {
      this.controlPlane?.terminateAll();
      this.server?.closeAllConnections();
    }, Math.min(this.config.gateway.drainTimeoutMs, 5000)).unref();
    clearInterval(this.pruneTimer);
    const channelsStopped = this.channels?.stop() ?? Promise.resolve();
    const unfinished = await (this.worker?.drain(this.config.gateway.drainTimeoutMs) ?? Promise.resolve(0));
    if (unfinished > 0) this.logger.warn({ jobs: unfinished }, 'stopping with jobs still running; they run again at the next start');
    await Promise.all([closed, channelsStopped]);
    clearTimeout(deadline);
    await this.plugins?.close();
    await this.checkpointer?.stop();
    await this.teardown();
    this.logger.info({ uptimeMs: this.uptimeMs }, 'daemon stopped');
    this.log.logger.flush?.();
    this.resolveStopped();
  }

  /** Releases what start-up took; safe to call on a half-started daemon. */
  async teardown(): Promise<void> {
    this.store?.close();
    if (this.record) releaseDaemonLock(this.paths, this.instanceId);
  }

  /** Forced exit on a second signal: release the lock and go. */
  abort(): void {
    this.logger.warn('second signal: exiting at once');
    try {
      this.store?.close();
    } finally {
      if (this.record) releaseDaemonLock(this.paths, this.instanceId);
    }
  }
}
