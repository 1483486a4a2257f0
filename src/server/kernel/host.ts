/**
 * Runs the daemon's modules: sets each up in dependency order with its
 * context, records what it registers, builds the table from every module and
 * every plugin (all or nothing per owner), swaps it in at once, and runs the
 * start and stop hooks in order and in reverse.
 */
import type { IncomingMessage } from 'node:http';
import type { Logger } from 'pino';
import type { GatewayConfig } from '../../shared/config/types.ts';
import type { BuildOutcome, PluginInfo } from '../../shared/protocol/results.ts';
import type { SecretStore } from '../../shared/secrets/secret-store.ts';
import type { Store } from '../store/database.ts';
import type { ApiDocumentPart } from './api-doc.ts';
import type { EventBus } from './events.ts';
import type {
  AuthLockoutView, BearerVerifier, Connections, CredentialView, DaemonView, Extension, FastRoute, GatewayModule, ModuleContext,
  OwnMethod, ReadinessCheck, RegisterFn, RegistrationApi,
} from './module.ts';
import { checkAuth, emptyRegistered, RegistryTable, TableBuilder } from './registry.ts';
import { compileSchema, loadSchemaCompiler } from './schema.ts';

const REGISTER_TIMEOUT_MS = 10_000;

type Call = (api: RegistrationApi) => void;

/** An API that only records what an owner registers, so a failing plugin leaves nothing behind and a module's registrations replay at every build. */
function recordingApi(name: string, log: Logger, calls: Call[]): RegistrationApi {
  return {
    name,
    log,
    http: { route: (route) => void calls.push((api) => api.http.route(route)) },
    ws: { route: (route) => void calls.push((api) => api.ws.route(route)) },
    rpc: { method: ((method: OwnMethod) => void calls.push((api) => api.rpc.method(method))) as RegistrationApi['rpc']['method'] },
    tools: { add: (tool) => void calls.push((api) => api.tools.add(tool)) },
    channels: { add: (channel) => void calls.push((api) => api.channels.add(channel)) },
    jobs: { handle: (kind, handler, options) => void calls.push((api) => api.jobs.handle(kind, handler, options)) },
  };
}

const withTimeout = <T>(work: Promise<T>, ms: number, what: string): Promise<T> => {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms / 1000} s`)), ms); });
  return Promise.race([work, bound]).finally(() => clearTimeout(timer));
};

/** The daemon's parts every module shares. */
export interface HostParts {
  daemon: DaemonView;
  config: () => GatewayConfig;
  store: Store;
  secrets: SecretStore;
  events: EventBus;
  connections: Connections;
  lockout: AuthLockoutView;
  credential: CredentialView;
  logger: Logger;
  /** Adds a bearer verifier to protected routes' authentication (the HTTP pipeline's). */
  addBearer: (verifier: BearerVerifier) => void;
  setOverlayIdentity: (identity: (req: IncomingMessage) => Promise<string | undefined>) => void;
}

/** Orders modules so that each comes after the modules it needs; refuses a missing or circular need. */
export function inDependencyOrder(modules: readonly GatewayModule<unknown>[]): GatewayModule<unknown>[] {
  const ordered: GatewayModule<unknown>[] = [];
  const state = new Map<GatewayModule<unknown>, 'visiting' | 'done'>();
  const ids = new Set<string>();
  for (const module of modules) {
    if (ids.has(module.id)) throw new Error(`module ${module.id} is composed twice`);
    ids.add(module.id);
  }
  const visit = (module: GatewayModule<unknown>, path: string[]) => {
    if (state.get(module) === 'done') return;
    if (state.get(module) === 'visiting') throw new Error(`modules need each other in a circle: ${[...path, module.id].join(' -> ')}`);
    if (!modules.includes(module)) throw new Error(`module ${path.at(-1)} needs module ${module.id}, which is not composed`);
    state.set(module, 'visiting');
    for (const need of module.needs ?? []) visit(need, [...path, module.id]);
    state.set(module, 'done');
    ordered.push(module);
  };
  for (const module of modules) visit(module, []);
  return ordered;
}

export class ModuleHost {
  table = new RegistryTable();
  plugins: PluginInfo[] = [];
  lastBuild?: BuildOutcome;
  readonly fastRoutes: FastRoute[] = [];
  private readonly reserved: string[] = [];
  private readonly documents: ApiDocumentPart[] = [];
  private readonly recorded: { owner: string; calls: Call[] }[] = [];
  private readonly checks = new Map<string, ReadinessCheck>();
  private readonly configChecks: ((next: GatewayConfig) => string[])[] = [];
  private readonly configWatchers: ((next: GatewayConfig, previous: GatewayConfig) => void)[] = [];
  private readonly secretWatchers: { names: string[]; listener: (name: string) => void | Promise<void> }[] = [];
  private readonly loaders: ((generation: number) => Promise<Extension[]>)[] = [];
  private readonly startHooks: { module: string; hook: () => void | Promise<void> }[] = [];
  private readonly stopHooks: { module: string; hook: (deadline: number) => void | Promise<void> }[] = [];
  private readonly exported = new Map<GatewayModule<unknown>, unknown>();
  private disposers: (() => unknown)[] = [];
  private generation = 0;
  private building?: Promise<BuildOutcome>;
  private readonly modules: GatewayModule<unknown>[];
  private readonly parts: HostParts;

  constructor(modules: readonly GatewayModule<unknown>[], parts: HostParts) {
    this.modules = inDependencyOrder(modules);
    this.parts = parts;
  }

  /** Migrates every module's tables, then sets every module up, in dependency order; a module that fails stops the start-up. */
  async setup(): Promise<void> {
    await this.parts.store.migrate(this.modules.filter((module) => module.migrations).map((module) => ({ module: module.id, migrations: module.migrations! })));
    for (const module of this.modules) {
      const calls: Call[] = [];
      this.recorded.push({ owner: module.id, calls });
      const exports = await module.setup(this.contextFor(module, calls));
      this.exported.set(module, exports);
    }
  }

  private contextFor(module: GatewayModule<unknown>, calls: Call[]): ModuleContext {
    const { parts } = this;
    const log = parts.logger.child({ module: module.id });
    const recording = recordingApi(module.id, log, calls);
    const needs = new Set(module.needs ?? []);
    return {
      ...recording,
      daemon: parts.daemon,
      config: parts.config,
      store: parts.store,
      secrets: parts.secrets,
      events: parts.events,
      connections: parts.connections,
      lockout: parts.lockout,
      credential: parts.credential,
      table: () => this.table,
      use: <E>(other: GatewayModule<E>): E => {
        if (!needs.has(other as GatewayModule<unknown>)) throw new Error(`module ${module.id} uses module ${other.id} without listing it in needs`);
        return this.exported.get(other as GatewayModule<unknown>) as E;
      },
      http: {
        ...recording.http,
        fast: (route) => {
          checkAuth(route, true, `${module.id}: route ${route.path}`);
          this.fastRoutes.push(route);
          this.reserved.push(route.path);
        },
        reserve: (path) => void this.reserved.push(path),
        bearer: parts.addBearer,
        overlayIdentity: parts.setOverlayIdentity,
        document: (part) => void this.documents.push(part),
      },
      readiness: { check: (name, check) => void this.checks.set(name, check) },
      configCheck: (check) => void this.configChecks.push(check),
      watch: {
        config: (listener) => void this.configWatchers.push(listener),
        secrets: (names, listener) => void this.secretWatchers.push({ names, listener }),
      },
      extend: (loader) => void this.loaders.push(loader),
      onStart: (hook) => void this.startHooks.push({ module: module.id, hook }),
      onStop: (hook) => void this.stopHooks.push({ module: module.id, hook }),
    };
  }

  /** What the modules documented of their routes, merged. */
  apiDocument(): ApiDocumentPart {
    const merged: Required<ApiDocumentPart> = { paths: {}, schemas: {} };
    for (const part of this.documents) {
      for (const [path, item] of Object.entries(part.paths)) merged.paths[path] = { ...merged.paths[path], ...item };
      Object.assign(merged.schemas, part.schemas);
    }
    return merged;
  }

  /** The fast route for a path, if a module answers it ahead of the HTTP application. */
  fastRoute(path: string): FastRoute | undefined {
    for (const route of this.fastRoutes) {
      if (path === route.path || (route.match === 'prefix' && path.startsWith(route.path.endsWith('/') ? route.path : `${route.path}/`))) return route;
    }
    return undefined;
  }

  /**
   * Builds a table from every module and plugin and swaps it in. At the first
   * build, plugins that fail are left out and reported; at a reload, any
   * failure keeps the previous table serving. One build at a time.
   */
  async build(initial: boolean): Promise<BuildOutcome> {
    while (this.building) await this.building.catch(() => undefined);
    const run = this.buildTable(initial);
    this.building = run;
    try {
      return await run;
    } finally {
      this.building = undefined;
    }
  }

  private async buildTable(initial: boolean): Promise<BuildOutcome> {
    const generation = ++this.generation;
    const { logger } = this.parts;
    const builder = new TableBuilder({ reservedPaths: () => this.reserved, prepare: loadSchemaCompiler, compileSchema: (schema) => void compileSchema(schema) });
    const infos: PluginInfo[] = [];
    const disposers: (() => unknown)[] = [];
    const errors: { plugin: string; error: string }[] = [];

    // The modules' own registrations: a refusal here is a defect of the composition, and fails the build outright.
    for (const { owner, calls } of this.recorded) {
      builder.atomically(() => {
        const api = builder.api(owner, logger.child({ module: owner }), true);
        for (const call of calls) call(api);
      });
      infos.push({ name: owner, source: 'built-in', builtin: true, status: 'loaded', registered: builder.table.registered.get(owner) ?? emptyRegistered() });
    }

    const extensions: Extension[] = [];
    for (const loader of this.loaders) extensions.push(...(await loader(generation)));
    if (extensions.length > 0) await loadSchemaCompiler();
    const failed = (name: string, source: string, message: string) => {
      errors.push({ plugin: name, error: message });
      infos.push({ name, source, builtin: false, status: 'error', error: message, registered: emptyRegistered() });
      logger.error({ source, error: message }, 'plugin failed to load');
    };
    for (const extension of extensions) {
      if ('error' in extension) {
        failed(extension.name, extension.source, extension.error);
        continue;
      }
      const { name, source } = extension;
      const log = logger.child({ plugin: name });
      const calls: Call[] = [];
      try {
        if (infos.some((info) => info.name === name)) throw new Error(`plugin ${name} is loaded twice, or takes the name of a module (check plugins.load)`);
        const returned = await withTimeout(Promise.resolve((extension.register as RegisterFn)(recordingApi(name, log, calls))), REGISTER_TIMEOUT_MS, `register() of plugin ${name}`);
        builder.atomically(() => {
          const api = builder.api(name, log, false);
          for (const call of calls) call(api);
        });
        if (typeof returned === 'function') disposers.push(returned as () => unknown);
        infos.push({ name, source, builtin: false, status: 'loaded', registered: builder.table.registered.get(name) ?? emptyRegistered() });
      } catch (error) {
        errors.push({ plugin: name, error: (error as Error).message });
        infos.push({ name, source, builtin: false, status: 'error', error: (error as Error).message, registered: emptyRegistered() });
        log.error({ source, error: (error as Error).message }, 'plugin failed to load');
      }
    }

    const outcome: BuildOutcome = { ok: errors.length === 0, at: new Date().toISOString(), generation, errors };
    this.lastBuild = outcome;
    if (!initial && errors.length > 0) {
      // The previous table keeps serving; what this attempt registered is let go.
      for (const dispose of disposers) await Promise.resolve().then(dispose).catch(() => undefined);
      // The listing keeps what still serves, marks the plugins that failed this time, and adds failed newcomers.
      const failure = (info: PluginInfo) => errors.find((e) => e.plugin === info.name || e.plugin === info.source)?.error;
      const serving = this.plugins.map((info) => (failure(info) ? { ...info, status: 'error' as const, error: failure(info) } : info));
      const newcomers = infos.filter((info) => info.status === 'error' && !serving.some((p) => p.name === info.name));
      this.plugins = [...serving, ...newcomers];
      logger.warn({ errors }, 'reload failed; the previous plugin table stays in place');
      return outcome;
    }
    const previous = this.disposers;
    this.table = builder.table;
    this.plugins = infos;
    this.disposers = disposers;
    for (const dispose of previous) await Promise.resolve().then(dispose).catch((error: unknown) => logger.warn({ err: error }, 'a plugin failed to clean up'));
    logger.info({ generation, plugins: infos.filter((i) => !i.builtin && i.status === 'loaded').map((i) => i.name), errors: errors.length }, initial ? 'plugins loaded' : 'plugins reloaded');
    return outcome;
  }

  /** Runs the start hooks in module order. */
  async start(): Promise<void> {
    for (const { hook } of this.startHooks) await hook();
  }

  /** Runs the stop hooks in reverse module order, each bounded by the deadline; then lets go of every plugin. */
  async stop(deadline: number): Promise<void> {
    for (const { module, hook } of [...this.stopHooks].reverse()) {
      try {
        await hook(deadline);
      } catch (error) {
        this.parts.logger.warn({ module, err: error }, 'a module did not stop cleanly');
      }
    }
    for (const dispose of this.disposers.splice(0)) await Promise.resolve().then(dispose).catch(() => undefined);
  }

  configChanged(next: GatewayConfig, previous: GatewayConfig): void {
    for (const listener of this.configWatchers) {
      try {
        listener(next, previous);
      } catch (error) {
        this.parts.logger.error({ err: error }, 'a configuration watcher failed');
      }
    }
  }

  /** Tells the modules watching a secret that it changed; waits for them. */
  async secretChanged(name: string): Promise<void> {
    const matches = (pattern: string) => (pattern.endsWith('*') ? name.startsWith(pattern.slice(0, -1)) : pattern === name);
    for (const { names, listener } of this.secretWatchers) {
      if (!names.some(matches)) continue;
      try {
        await listener(name);
      } catch (error) {
        this.parts.logger.error({ err: error, secretName: name }, 'a secret watcher failed');
      }
    }
  }

  /** What the modules find wrong with a configuration about to be written. */
  configProblems(next: GatewayConfig): string[] {
    return this.configChecks.flatMap((check) => check(next));
  }

  /** The readiness checks that fail, by name, with the reason; empty when the daemon can serve. */
  problems(): Record<string, string> {
    const problems: Record<string, string> = {};
    for (const [name, check] of this.checks) {
      let reason: string | undefined;
      try {
        reason = check();
      } catch (error) {
        reason = (error as Error).message;
      }
      if (reason) problems[name] = reason;
    }
    return problems;
  }
}
