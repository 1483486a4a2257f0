import type { IncomingMessage } from 'node:http';
import type { Context } from 'koa';
import type { Logger } from 'pino';
import type { WebSocket } from 'ws';
import { isOperatorScope, type OperatorScope } from '../../shared/protocol/scopes.ts';
import type { ChannelKind } from '../channels/channel.ts';
import type { JobHandler } from '../jobs/job-handlers.ts';
import type { MethodHandler } from '../ws/method-table.ts';

/** `gateway`: the gateway authenticates the caller first; `plugin`: the plugin does it itself. */
export type RouteAuth = 'gateway' | 'plugin';

export interface HttpRoute {
  /** GET, POST, ... or * for any method. HEAD falls back to GET. */
  method: string;
  path: string;
  /** exact (default): the path only; prefix: the path and everything below it, segment by segment. */
  match?: 'exact' | 'prefix';
  auth: RouteAuth;
  handler: (ctx: Context) => unknown | Promise<unknown>;
}

export interface WsRoute {
  path: string;
  auth: RouteAuth;
  handler: (socket: WebSocket, request: IncomingMessage) => void;
}

export interface RpcMethodDef {
  name: string;
  scope: OperatorScope;
  handler: MethodHandler;
}

/** Who invoked a tool, and how. */
export interface ToolContext {
  /** A stable caller name (never a secret). */
  caller: string;
  surface: 'http' | 'ws';
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
  handler: (args: Record<string, unknown>, context: ToolContext) => unknown | Promise<unknown>;
}

/** What a plugin's register(api) receives. */
export interface PluginApi {
  readonly name: string;
  http: { route(route: HttpRoute): void };
  ws: { route(route: WsRoute): void };
  rpc: { method(method: RpcMethodDef): void };
  tools: { add(tool: ToolDef): void };
  /** A channel: its id (the key under `channels.` in the config) with the channel kind's parts. */
  channels: { add(channel: ChannelKind & { id: string }): void };
  jobs: { handle(kind: string, handler: JobHandler): void };
  log: Logger;
}

export interface Owned<T> {
  plugin: string;
  value: T;
}

export interface Registered {
  routes: string[];
  wsRoutes: string[];
  methods: string[];
  tools: string[];
  channels: string[];
  jobKinds: string[];
}

export const emptyRegistered = (): Registered => ({ routes: [], wsRoutes: [], methods: [], tools: [], channels: [], jobKinds: [] });

/** A registration the table refuses; names both plugins when they collide. */
export class RegistrationError extends Error {}

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', '*']);
const NAME = /^[A-Za-z][A-Za-z0-9_.:-]{0,63}$/;
/** Paths the gateway serves itself; plugins cannot take them or anything below them. */
const RESERVED = ['/healthz', '/health', '/readyz', '/ready', '/openapi.json', '/webhooks', '/tokens', '/jobs', '/tools', '/oauth', '/v1', '/__gateway__'];

function checkPath(path: unknown, what: string): string {
  if (typeof path !== 'string' || !path.startsWith('/') || path.length > 512) throw new RegistrationError(`${what}: path must start with /`);
  if (/[\s?#\\]|%2e|%2f|\/\.\.?(\/|$)|\/\//i.test(path)) throw new RegistrationError(`${what}: path ${path} must be a plain path (no query, dot segments, encoded slashes or doubled slashes)`);
  return path;
}

const routeKey = (method: string, path: string, match: string) => `${method} ${path} (${match})`;

/**
 * The routes, WebSocket endpoints, methods, tools, channels and job kinds that
 * plugins registered: built complete, then swapped in at once, never changed
 * while it serves.
 */
/** One level of the prefix-route tree: routes at this path, by method, and the next path segments. */
interface PrefixNode {
  routes: Map<string, Owned<HttpRoute>>;
  children: Map<string, PrefixNode>;
}

const newNode = (): PrefixNode => ({ routes: new Map(), children: new Map() });
const segmentsOf = (path: string): string[] => path.split('/').filter(Boolean);

/**
 * The routes, WebSocket endpoints, methods, tools, channels and job kinds that
 * plugins registered: built complete, then swapped in at once, never changed
 * while it serves. Exact routes are one map lookup; prefix routes sit in a tree
 * of path segments, so a lookup costs the depth of the path, not the number of routes.
 */
export class PluginTable {
  readonly exact = new Map<string, Owned<HttpRoute>>();
  prefixRoot: PrefixNode = newNode();
  readonly ws = new Map<string, Owned<WsRoute>>();
  readonly methods = new Map<string, Owned<RpcMethodDef>>();
  readonly tools = new Map<string, Owned<ToolDef>>();
  readonly channels = new Map<string, Owned<ChannelKind>>();
  readonly jobs = new Map<string, Owned<JobHandler>>();
  readonly registered = new Map<string, Registered>();

  addPrefix(method: string, path: string, entry: Owned<HttpRoute>): void {
    let node = this.prefixRoot;
    for (const segment of segmentsOf(path)) {
      let child = node.children.get(segment);
      if (!child) {
        child = newNode();
        node.children.set(segment, child);
      }
      node = child;
    }
    node.routes.set(method, entry);
  }

  private static pick(routes: Map<string, Owned<HttpRoute>>, method: string): Owned<HttpRoute> | undefined {
    return routes.get(method) ?? (method === 'HEAD' ? routes.get('GET') : undefined) ?? routes.get('*');
  }

  /** The route for a request, or undefined: an exact route first, else the deepest prefix route; HEAD falls back to GET, any method to *. */
  route(method: string, path: string): Owned<HttpRoute> | undefined {
    const exact = this.exact.get(`${method} ${path}`) ?? (method === 'HEAD' ? this.exact.get(`GET ${path}`) : undefined) ?? this.exact.get(`* ${path}`);
    if (exact) return exact;
    let node: PrefixNode | undefined = this.prefixRoot;
    let found: Owned<HttpRoute> | undefined;
    let start = 1;
    while (node) {
      if (node.routes.size > 0) found = PluginTable.pick(node.routes, method) ?? found;
      if (start > path.length) break;
      let end = path.indexOf('/', start);
      if (end === -1) end = path.length;
      const segment = path.slice(start, end);
      start = end + 1;
      node = segment === '' ? node : node.children.get(segment);
    }
    return found;
  }

  /** The methods some route serves this path with (for 405). */
  allowedMethods(path: string): string[] {
    const methods = new Set<string>();
    for (const key of this.exact.keys()) {
      const space = key.indexOf(' ');
      if (key.slice(space + 1) === path) methods.add(key.slice(0, space));
    }
    let node: PrefixNode | undefined = this.prefixRoot;
    for (const segment of ['', ...segmentsOf(path)]) {
      if (segment !== '') node = node?.children.get(segment);
      if (!node) break;
      for (const method of node.routes.keys()) methods.add(method);
    }
    return [...methods];
  }

  /** A copy of the prefix tree's structure (entries are shared), to undo a partial registration. */
  clonePrefixes(): PrefixNode {
    const copy = (node: PrefixNode): PrefixNode => ({ routes: new Map(node.routes), children: new Map([...node.children].map(([k, v]) => [k, copy(v)])) });
    return copy(this.prefixRoot);
  }
}

export interface BuildLimits {
  /** Names the gateway itself uses: RPC methods, job kinds, channel ids. */
  reservedMethod: (name: string) => boolean;
  reservedJobKind: (kind: string) => boolean;
  reservedChannel: (id: string) => boolean;
  /** Extra paths plugins cannot take (such as the hooks path). */
  reservedPaths: string[];
  /** Loads what compileSchema needs; awaited before plugins that are not built in register. */
  prepare?: () => Promise<void>;
  /** Compiles a tool's input schema; throws when it is not a valid JSON Schema (checked for plugins, not built-ins). */
  compileSchema: (schema: Record<string, unknown>) => void;
}

/** Collects registrations into a new table, refusing conflicts as they come. */
export class TableBuilder {
  readonly table = new PluginTable();
  private readonly limits: BuildLimits;
  private readonly routeKeys = new Map<string, Owned<HttpRoute>>();

  constructor(limits: BuildLimits) {
    this.limits = limits;
  }

  /** Runs registrations all or nothing: a refused one undoes the others made inside. */
  atomically(work: () => void): void {
    const { table } = this;
    const maps = [table.exact, table.ws, table.methods, table.tools, table.channels, table.jobs, table.registered, this.routeKeys] as Map<string, unknown>[];
    const saved = maps.map((map) => new Map(map));
    const prefixes = table.clonePrefixes();
    try {
      work();
    } catch (error) {
      maps.forEach((map, index) => {
        map.clear();
        for (const [key, value] of saved[index]!) map.set(key, value);
      });
      table.prefixRoot = prefixes;
      throw error;
    }
  }

  private note(plugin: string): Registered {
    let registered = this.table.registered.get(plugin);
    if (!registered) {
      registered = emptyRegistered();
      this.table.registered.set(plugin, registered);
    }
    return registered;
  }

  /** The API handed to one plugin's register(); `builtin` plugins may use /__gateway__/. */
  api(plugin: string, log: Logger, builtin = false): PluginApi {
    this.note(plugin);
    return {
      name: plugin,
      log,
      http: { route: (route) => this.addRoute(plugin, route, builtin) },
      ws: { route: (route) => this.addWsRoute(plugin, route) },
      rpc: { method: (method) => this.addMethod(plugin, method) },
      tools: { add: (tool) => this.addTool(plugin, tool, builtin) },
      channels: { add: (channel) => this.addChannel(plugin, channel?.id, channel) },
      jobs: { handle: (kind, handler) => this.addJob(plugin, kind, handler) },
    };
  }

  private reservedPath(path: string, builtin: boolean): boolean {
    const reserved = [...RESERVED, ...this.limits.reservedPaths].filter((p) => !(builtin && p === '/__gateway__'));
    return path === '/' || reserved.some((p) => path === p || path.startsWith(`${p}/`));
  }

  private addRoute(plugin: string, route: HttpRoute, builtin: boolean): void {
    const method = String(route?.method ?? '').toUpperCase();
    if (!METHODS.has(method)) throw new RegistrationError(`plugin ${plugin}: route method must be one of ${[...METHODS].join(', ')}`);
    const path = checkPath(route.path, `plugin ${plugin}`);
    const match = route.match ?? 'exact';
    if (match !== 'exact' && match !== 'prefix') throw new RegistrationError(`plugin ${plugin}: route ${path}: match must be exact or prefix`);
    if (route.auth !== 'gateway' && route.auth !== 'plugin') throw new RegistrationError(`plugin ${plugin}: route ${path}: auth must be gateway or plugin`);
    if (typeof route.handler !== 'function') throw new RegistrationError(`plugin ${plugin}: route ${path}: handler must be a function`);
    if (this.reservedPath(path, builtin)) throw new RegistrationError(`plugin ${plugin}: route ${path} overlaps a path the gateway serves itself`);
    const key = routeKey(method, match === 'prefix' ? `/${segmentsOf(path).join('/')}` : path, match);
    const existing = this.routeKeys.get(key);
    if (existing) {
      const auth = existing.value.auth === route.auth ? `both with auth ${route.auth}` : `auth ${existing.value.auth} vs ${route.auth}`;
      throw new RegistrationError(`route ${key} of plugin ${plugin} conflicts with the same route of plugin ${existing.plugin} (${auth})`);
    }
    const entry = { plugin, value: { ...route, method, path, match } };
    this.routeKeys.set(key, entry);
    if (match === 'exact') this.table.exact.set(`${method} ${path}`, entry);
    else this.table.addPrefix(method, path, entry);
    this.note(plugin).routes.push(key);
  }

  private addWsRoute(plugin: string, route: WsRoute): void {
    const path = checkPath(route?.path, `plugin ${plugin}`);
    if (route.auth !== 'gateway' && route.auth !== 'plugin') throw new RegistrationError(`plugin ${plugin}: WebSocket route ${path}: auth must be gateway or plugin`);
    if (typeof route.handler !== 'function') throw new RegistrationError(`plugin ${plugin}: WebSocket route ${path}: handler must be a function`);
    if (path === '/') throw new RegistrationError(`plugin ${plugin}: / is the gateway's control plane`);
    const existing = this.table.ws.get(path);
    if (existing) throw new RegistrationError(`WebSocket route ${path} of plugin ${plugin} conflicts with plugin ${existing.plugin} (auth ${existing.value.auth} vs ${route.auth})`);
    this.table.ws.set(path, { plugin, value: { ...route, path } });
    this.note(plugin).wsRoutes.push(path);
  }

  private addMethod(plugin: string, method: RpcMethodDef): void {
    const name = method?.name;
    if (typeof name !== 'string' || !NAME.test(name)) throw new RegistrationError(`plugin ${plugin}: method name must be 1-64 letters, digits, . _ : -`);
    if (!isOperatorScope(method.scope)) throw new RegistrationError(`plugin ${plugin}: method ${name}: scope must be an operator scope`);
    if (typeof method.handler !== 'function') throw new RegistrationError(`plugin ${plugin}: method ${name}: handler must be a function`);
    if (this.limits.reservedMethod(name)) throw new RegistrationError(`plugin ${plugin}: method ${name} is one of the gateway's own`);
    const existing = this.table.methods.get(name);
    if (existing) throw new RegistrationError(`method ${name} of plugin ${plugin} conflicts with the method of plugin ${existing.plugin}`);
    this.table.methods.set(name, { plugin, value: method });
    this.note(plugin).methods.push(name);
  }

  private addTool(plugin: string, tool: ToolDef, builtin: boolean): void {
    const name = tool?.name;
    if (typeof name !== 'string' || !NAME.test(name)) throw new RegistrationError(`plugin ${plugin}: tool name must be 1-64 letters, digits, . _ : -`);
    if (typeof tool.handler !== 'function') throw new RegistrationError(`plugin ${plugin}: tool ${name}: handler must be a function`);
    if (typeof tool.description !== 'string') throw new RegistrationError(`plugin ${plugin}: tool ${name}: description must be a string`);
    const existing = this.table.tools.get(name);
    if (existing) throw new RegistrationError(`tool ${name} of plugin ${plugin} conflicts with the tool of plugin ${existing.plugin}`);
    if (tool.inputSchema !== undefined && !builtin) {
      try {
        this.limits.compileSchema(tool.inputSchema);
      } catch (error) {
        throw new RegistrationError(`plugin ${plugin}: tool ${name}: inputSchema is not a valid JSON Schema (${(error as Error).message})`);
      }
    }
    this.table.tools.set(name, { plugin, value: tool });
    this.note(plugin).tools.push(name);
  }

  private addChannel(plugin: string, id: string, kind: ChannelKind): void {
    if (typeof id !== 'string' || !/^[a-z0-9][a-z0-9_-]{0,31}$/.test(id)) throw new RegistrationError(`plugin ${plugin}: channel id must be lower-case letters, digits, _ and -`);
    if (!kind || typeof kind.create !== 'function' || typeof kind.normalizePeer !== 'function') throw new RegistrationError(`plugin ${plugin}: channel ${id} needs create and normalizePeer`);
    if (this.limits.reservedChannel(id)) throw new RegistrationError(`plugin ${plugin}: channel ${id} is built in`);
    const existing = this.table.channels.get(id);
    if (existing) throw new RegistrationError(`channel ${id} of plugin ${plugin} conflicts with the channel of plugin ${existing.plugin}`);
    this.table.channels.set(id, { plugin, value: kind });
    this.note(plugin).channels.push(id);
  }

  private addJob(plugin: string, kind: string, handler: JobHandler): void {
    if (typeof kind !== 'string' || !NAME.test(kind)) throw new RegistrationError(`plugin ${plugin}: job kind must be 1-64 letters, digits, . _ : -`);
    if (typeof handler !== 'function') throw new RegistrationError(`plugin ${plugin}: job ${kind}: handler must be a function`);
    if (this.limits.reservedJobKind(kind)) throw new RegistrationError(`plugin ${plugin}: job kind ${kind} is handled by the gateway itself`);
    const existing = this.table.jobs.get(kind);
    if (existing) throw new RegistrationError(`job kind ${kind} of plugin ${plugin} conflicts with the handler of plugin ${existing.plugin}`);
    this.table.jobs.set(kind, { plugin, value: handler });
    this.note(plugin).jobKinds.push(kind);
  }
}
