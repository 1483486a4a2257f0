import type { Logger } from 'pino';
import type { RegisterFn } from './loader.ts';
import { emptyRegistered, PluginTable, RegistrationError, TableBuilder, type BuildLimits, type PluginApi, type Registered } from './registry.ts';

const REGISTER_TIMEOUT_MS = 10_000;

export interface BuiltinPlugin {
  name: string;
  register: RegisterFn;
}

export interface PluginInfo {
  name: string;
  source: string;
  builtin: boolean;
  status: 'loaded' | 'error';
  error?: string;
  registered: Registered;
}

export interface ReloadOutcome {
  ok: boolean;
  at: string;
  generation: number;
  errors: { plugin: string; error: string }[];
}

export interface PluginHostOptions {
  builtins: BuiltinPlugin[];
  /** The plugin specs to load (`plugins.load`), read at each load. */
  specs: () => string[];
  profileDir: string;
  logger: Logger;
  limits: BuildLimits;
}

type Call = (api: PluginApi) => void;

/** An API that only records what a plugin registers, so a failing plugin leaves nothing behind. */
function recordingApi(name: string, log: Logger, calls: Call[]): PluginApi {
  return {
    name,
    log,
    http: { route: (route) => void calls.push((api) => api.http.route(route)) },
    ws: { route: (route) => void calls.push((api) => api.ws.route(route)) },
    rpc: { method: (method) => void calls.push((api) => api.rpc.method(method)) },
    tools: { add: (tool) => void calls.push((api) => api.tools.add(tool)) },
    channels: { add: (channel) => void calls.push((api) => api.channels.add(channel)) },
    jobs: { handle: (kind, handler) => void calls.push((api) => api.jobs.handle(kind, handler)) },
  };
}

const withTimeout = <T>(work: Promise<T>, ms: number, what: string): Promise<T> => {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms / 1000} s`)), ms); });
  return Promise.race([work, bound]).finally(() => clearTimeout(timer));
};

/**
 * Loads the built-in and configured plugins into a table and swaps it in at
 * once. Requests already running keep the table they started with; a reload
 * where any plugin fails leaves the previous table serving.
 */
export class PluginHost {
  table = new PluginTable();
  plugins: PluginInfo[] = [];
  lastReload?: ReloadOutcome;
  private generation = 0;
  private disposers: (() => unknown)[] = [];
  private readonly options: PluginHostOptions;
  private loading?: Promise<ReloadOutcome>;

  constructor(options: PluginHostOptions) {
    this.options = options;
  }

  /** The first load: plugins that fail are left out, and their errors reported; the rest serve. */
  start(): Promise<ReloadOutcome> {
    return this.load(true);
  }

  /** Loads everything again; one reload at a time (a second request waits for the running one). */
  async reload(): Promise<ReloadOutcome> {
    while (this.loading) await this.loading.catch(() => undefined);
    return this.load(false);
  }

  private async load(initial: boolean): Promise<ReloadOutcome> {
    const run = this.build(initial);
    this.loading = run;
    try {
      return await run;
    } finally {
      this.loading = undefined;
    }
  }

  private async build(initial: boolean): Promise<ReloadOutcome> {
    const generation = ++this.generation;
    const { logger, limits } = this.options;
    const builder = new TableBuilder(limits);
    const infos: PluginInfo[] = [];
    const disposers: (() => unknown)[] = [];
    const errors: { plugin: string; error: string }[] = [];

    const add = async (name: string, source: string, builtin: boolean, register: RegisterFn) => {
      const log = logger.child({ plugin: name });
      const calls: Call[] = [];
      try {
        if (infos.some((info) => info.name === name)) throw new RegistrationError(`plugin ${name} is loaded twice (check plugins.load)`);
        const returned = await withTimeout(Promise.resolve(register(recordingApi(name, log, calls))), REGISTER_TIMEOUT_MS, `register() of plugin ${name}`);
        builder.atomically(() => {
          const api = builder.api(name, log, builtin);
          for (const call of calls) call(api);
        });
        if (typeof returned === 'function') disposers.push(returned as () => unknown);
        infos.push({ name, source, builtin, status: 'loaded', registered: builder.table.registered.get(name) ?? emptyRegistered() });
      } catch (error) {
        const message = (error as Error).message;
        errors.push({ plugin: name, error: message });
        infos.push({ name, source, builtin, status: 'error', error: message, registered: emptyRegistered() });
        log.error({ source, error: message }, 'plugin failed to load');
      }
    };

    for (const builtin of this.options.builtins) await add(builtin.name, 'built-in', true, builtin.register);
    const specs = this.options.specs();
    if (specs.length > 0) await limits.prepare?.();
    for (const spec of specs) {
      let module;
      try {
        const { importPlugin } = await import('./loader.ts');
        module = await importPlugin(spec, this.options.profileDir, generation);
      } catch (error) {
        const message = (error as Error).message;
        errors.push({ plugin: spec, error: message });
        infos.push({ name: spec, source: spec, builtin: false, status: 'error', error: message, registered: emptyRegistered() });
        logger.error({ source: spec, error: message }, 'plugin failed to load');
        continue;
      }
      await add(module.name, spec, false, module.register);
    }

    const outcome: ReloadOutcome = { ok: errors.length === 0, at: new Date().toISOString(), generation, errors };
    this.lastReload = outcome;
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
    logger.info({ generation, plugins: infos.filter((i) => i.status === 'loaded').map((i) => i.name), errors: errors.length }, initial ? 'plugins loaded' : 'plugins reloaded');
    return outcome;
  }

  /** Lets go of every plugin (at shutdown). */
  async close(): Promise<void> {
    for (const dispose of this.disposers.splice(0)) await Promise.resolve().then(dispose).catch(() => undefined);
  }
}
