/**
 * The table of everything modules and plugins registered: HTTP routes,
 * WebSocket routes, RPC methods, tools, channels and job handlers. It is
 * built complete, then swapped in at once, and never changes while it
 * serves; conflicts are refused as registrations come, naming both owners.
 */
import type { Logger } from 'pino';
import { METHODS, type MethodName } from '../../shared/protocol/methods.ts';
import { isOperatorScope, type OperatorScope } from '../../shared/protocol/scopes.ts';
import type { ChannelKind } from './channel.ts';
import { DomainError } from './errors.ts';
import type { HttpRoute, JobHandler, JobKind, JobKindOptions, MethodHandler, OwnMethod, RegistrationApi, RouteAuth, ToolDef, WsRoute } from './registration.ts';

export interface Owned<T> {
  /** The module or plugin that registered it. */
  owner: string;
  builtin: boolean;
  value: T;
}

/** A method as the control plane dispatches it. */
export interface MethodEntry {
  name: string;
  scope: OperatorScope | 'node';
  /** A JSON Schema the params must meet, checked before the handler runs. */
  params?: Record<string, unknown>;
  /** The protocol's own validator for a declared method. */
  declared: boolean;
  handler: MethodHandler;
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

/** A registration the table refuses. */
export const refused = (message: string) => new DomainError('invalid', message, { code: 'registration_refused' });

const METHODS_ALLOWED = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', '*']);
const NAME = /^[A-Za-z][A-Za-z0-9_.:-]{0,63}$/;
const JOB_PREFIX = /^[A-Za-z][A-Za-z0-9_.:-]{0,62}\.\*$/;
const CHANNEL_ID = /^[a-z0-9][a-z0-9_-]{0,31}$/;
/** Paths the gateway keeps for itself whatever modules are composed: plugins cannot take them or anything below them. */
const ALWAYS_RESERVED = ['/healthz', '/health', '/readyz', '/ready', '/openapi.json', '/__gateway__'];

function checkPath(path: unknown, what: string): string {
  if (typeof path !== 'string' || !path.startsWith('/') || path.length > 512) throw refused(`${what}: path must start with /`);
  if (/[\s?#\\]|%2e|%2f|\/\.\.?(\/|$)|\/\//i.test(path)) throw refused(`${what}: path ${path} must be a plain path (no query, dot segments, encoded slashes or doubled slashes)`);
  return path;
}

/**
 * Checks a route's declared authentication: public (built-in routes only),
 * the gateway credential, a scope (built-in routes only), a verifier of its
 * own, or the handler's own check (plugin: a plugin's code).
 */
export function checkAuth(route: { auth?: unknown; body?: unknown }, builtin: boolean, what: string): void {
  const auth = route.auth as RouteAuth | undefined;
  const named = builtin ? ['public', 'gateway', 'plugin'] : ['gateway', 'plugin'];
  if (typeof auth === 'string' && named.includes(auth)) return;
  if (builtin && typeof auth === 'object' && auth !== null && 'scope' in auth && typeof auth.scope === 'string') {
    if (auth.open !== undefined && typeof auth.open !== 'function') throw refused(`${what}: auth.open must be a function`);
    return;
  }
  if (typeof auth === 'object' && auth !== null && 'verify' in auth && typeof auth.verify === 'object' && auth.verify !== null) {
    const { headers, body } = auth.verify;
    if (headers === undefined && body === undefined) throw refused(`${what}: auth.verify needs headers(req) or body(req, body)`);
    if ((headers !== undefined && typeof headers !== 'function') || (body !== undefined && typeof body !== 'function')) throw refused(`${what}: auth.verify's headers and body must be functions`);
    if (body !== undefined && route.body === undefined) throw refused(`${what}: a verifier over the body needs the route to declare its body`);
    return;
  }
  throw refused(`${what}: auth must be ${[...named, ...(builtin ? ['{scope}'] : []), '{verify}'].join(' or ')}`);
}

const segmentsOf = (path: string): string[] => path.split('/').filter(Boolean);
const routeKey = (method: string, path: string, match: string) => `${method} ${path} (${match})`;
const who = (entry: { owner: string; builtin: boolean }) => `${entry.builtin ? 'module' : 'plugin'} ${entry.owner}`;

/** One level of the route tree: routes ending here, routes covering everything below, and the next segments. */
interface RouteNode {
  exact: Map<string, Owned<HttpRoute>>;
  prefix: Map<string, Owned<HttpRoute>>;
  children: Map<string, RouteNode>;
  /** A `:name` segment: matches any one segment the literal children do not. */
  param?: { name: string; node: RouteNode };
}

const newNode = (): RouteNode => ({ exact: new Map(), prefix: new Map(), children: new Map() });

const pick = (routes: Map<string, Owned<HttpRoute>>, method: string): Owned<HttpRoute> | undefined =>
  routes.get(method) ?? (method === 'HEAD' ? routes.get('GET') : undefined) ?? routes.get('*');

export interface RouteMatch {
  entry: Owned<HttpRoute>;
  params: Record<string, string>;
}

/**
 * Routes sit in a tree of path segments, so a lookup costs the depth of the
 * path, not the number of routes: an exact route first, else the deepest
 * prefix route; HEAD falls back to GET, any method to *.
 */
export class RegistryTable {
  root: RouteNode = newNode();
  readonly ws = new Map<string, Owned<WsRoute>>();
  readonly methods = new Map<string, Owned<MethodEntry>>();
  readonly tools = new Map<string, Owned<ToolDef>>();
  readonly channels = new Map<string, Owned<ChannelKind>>();
  readonly jobs = new Map<string, Owned<JobKind>>();
  readonly registered = new Map<string, Registered>();

  route(method: string, path: string): RouteMatch | undefined {
    const segments = path.split('/');
    let found: RouteMatch | undefined;
    const walk = (node: RouteNode, index: number, params: Record<string, string>): RouteMatch | undefined => {
      const prefix = node.prefix.size > 0 ? pick(node.prefix, method) : undefined;
      if (prefix) found = { entry: prefix, params };
      // Skip empty segments (a trailing slash, the leading one).
      while (index < segments.length && segments[index] === '') index++;
      if (index >= segments.length) {
        const exact = pick(node.exact, method);
        return exact ? { entry: exact, params } : undefined;
      }
      const segment = segments[index]!;
      const child = node.children.get(segment);
      if (child) {
        const hit = walk(child, index + 1, params);
        if (hit) return hit;
      }
      if (node.param) {
        let value: string;
        try {
          value = decodeURIComponent(segment);
        } catch {
          return undefined;
        }
        const hit = walk(node.param.node, index + 1, { ...params, [node.param.name]: value });
        if (hit) return hit;
      }
      return undefined;
    };
    return walk(this.root, 0, {}) ?? found;
  }

  /** The methods some route serves this path with (for 405 and Allow). */
  allowedMethods(path: string): string[] {
    const methods = new Set<string>();
    const segments = segmentsOf(path);
    const walk = (node: RouteNode, index: number) => {
      for (const method of node.prefix.keys()) methods.add(method);
      if (index === segments.length) {
        for (const method of node.exact.keys()) methods.add(method);
        return;
      }
      const child = node.children.get(segments[index]!);
      if (child) walk(child, index + 1);
      if (node.param) walk(node.param.node, index + 1);
    };
    walk(this.root, 0);
    return [...methods].sort();
  }

  /** The handler of a job kind: its own, else the longest prefix handler (`github.*`). */
  jobHandler(kind: string): Owned<JobKind> | undefined {
    const exact = this.jobs.get(kind);
    if (exact) return exact;
    let best: [string, Owned<JobKind>] | undefined;
    for (const [key, entry] of this.jobs) {
      if (key.endsWith('.*') && kind.startsWith(key.slice(0, -1)) && (!best || key.length > best[0].length)) best = [key, entry];
    }
    return best?.[1];
  }

  addRoute(method: string, path: string, match: 'exact' | 'prefix', entry: Owned<HttpRoute>): void {
    let node = this.root;
    for (const segment of segmentsOf(path)) {
      if (segment.startsWith(':')) {
        const name = segment.slice(1);
        if (node.param && node.param.name !== name) throw refused(`${who(entry)}: route ${path}: parameter :${name} conflicts with :${node.param.name} at the same place`);
        node.param ??= { name, node: newNode() };
        node = node.param.node;
        continue;
      }
      let child = node.children.get(segment);
      if (!child) {
        child = newNode();
        node.children.set(segment, child);
      }
      node = child;
    }
    (match === 'exact' ? node.exact : node.prefix).set(method, entry);
  }

  /** A deep copy of the route tree's structure (entries are shared), to undo a partial registration. */
  cloneRoutes(): RouteNode {
    const copy = (node: RouteNode): RouteNode => ({
      exact: new Map(node.exact), prefix: new Map(node.prefix),
      children: new Map([...node.children].map(([key, value]) => [key, copy(value)])),
      ...(node.param ? { param: { name: node.param.name, node: copy(node.param.node) } } : {}),
    });
    return copy(this.root);
  }
}

export interface BuildLimits {
  /** Paths (and everything below them) that plugins cannot take. */
  reservedPaths: () => readonly string[];
  /** Loads what compileSchema needs; awaited before plugins register. */
  prepare?: () => Promise<void>;
  /** Compiles a JSON Schema; throws when it is not a valid one (checked for plugins, not built-ins). */
  compileSchema: (schema: Record<string, unknown>) => void;
}

/** Collects registrations into a new table, refusing conflicts as they come. */
export class TableBuilder {
  readonly table = new RegistryTable();
  private readonly limits: BuildLimits;
  private readonly routeKeys = new Map<string, Owned<HttpRoute>>();

  constructor(limits: BuildLimits) {
    this.limits = limits;
  }

  /** Runs registrations all or nothing: a refused one undoes the others made inside. */
  atomically(work: () => void): void {
    const { table } = this;
    const maps = [table.ws, table.methods, table.tools, table.channels, table.jobs, table.registered, this.routeKeys] as Map<string, unknown>[];
    const saved = maps.map((map) => new Map(map));
    const routes = table.cloneRoutes();
    try {
      work();
    } catch (error) {
      maps.forEach((map, index) => {
        map.clear();
        for (const [key, value] of saved[index]!) map.set(key, value);
      });
      table.root = routes;
      throw error;
    }
  }

  private note(owner: string): Registered {
    let registered = this.table.registered.get(owner);
    if (!registered) {
      registered = emptyRegistered();
      this.table.registered.set(owner, registered);
    }
    return registered;
  }

  /** The registration API of one owner; built-in modules may use the paths and names the gateway keeps. */
  api(owner: string, log: Logger, builtin = false): RegistrationApi {
    this.note(owner);
    const id = { owner, builtin };
    return {
      name: owner,
      log,
      http: { route: (route) => this.addRoute(id, route) },
      ws: { route: (route) => this.addWsRoute(id, route) },
      rpc: { method: ((method: OwnMethod) => this.addMethod(id, method)) as RegistrationApi['rpc']['method'] },
      tools: { add: (tool) => this.addTool(id, tool) },
      channels: { add: (channel) => this.addChannel(id, channel?.id, channel) },
      jobs: { handle: (kind, handler, options) => this.addJob(id, kind, handler, options) },
    };
  }

  private reservedPath(path: string): boolean {
    const reserved = [...ALWAYS_RESERVED, ...this.limits.reservedPaths()];
    return path === '/' || reserved.some((p) => path === p || path.startsWith(p.endsWith('/') ? p : `${p}/`));
  }

  private addRoute(id: { owner: string; builtin: boolean }, route: HttpRoute): void {
    const label = who(id);
    const method = String(route?.method ?? '').toUpperCase();
    if (!METHODS_ALLOWED.has(method)) throw refused(`${label}: route method must be one of ${[...METHODS_ALLOWED].join(', ')}`);
    const path = checkPath(route.path, label);
    const match = route.match ?? 'exact';
    if (match !== 'exact' && match !== 'prefix') throw refused(`${label}: route ${path}: match must be exact or prefix`);
    checkAuth(route, id.builtin, `${label}: route ${path}`);
    if (typeof route.handler !== 'function') throw refused(`${label}: route ${path}: handler must be a function`);
    if (!id.builtin && this.reservedPath(path)) throw refused(`${label}: route ${path} overlaps a path the gateway serves itself`);
    const key = routeKey(method, match === 'prefix' ? `/${segmentsOf(path).join('/')}` : path, match);
    const existing = this.routeKeys.get(key);
    const authName = (auth: HttpRoute['auth']) => (typeof auth === 'string' ? auth : 'scope' in auth ? `scope ${auth.scope}` : 'a verifier of its own');
    if (existing) {
      const auth = authName(existing.value.auth) === authName(route.auth) ? `both with auth ${authName(route.auth)}` : `auth ${authName(existing.value.auth)} vs ${authName(route.auth)}`;
      throw refused(`route ${key} of ${label} conflicts with the same route of ${who(existing)} (${auth})`);
    }
    const entry = { ...id, value: { ...route, method, path, match } };
    this.routeKeys.set(key, entry);
    this.table.addRoute(method, path, match, entry);
    this.note(id.owner).routes.push(key);
  }

  private addWsRoute(id: { owner: string; builtin: boolean }, route: WsRoute): void {
    const label = who(id);
    const path = checkPath(route?.path, label);
    if (route.auth !== 'gateway' && route.auth !== 'plugin') throw refused(`${label}: WebSocket route ${path}: auth must be gateway or plugin`);
    if (typeof route.handler !== 'function') throw refused(`${label}: WebSocket route ${path}: handler must be a function`);
    if (path === '/') throw refused(`${label}: / is the gateway's control plane`);
    const existing = this.table.ws.get(path);
    if (existing) throw refused(`WebSocket route ${path} of ${label} conflicts with ${who(existing)} (auth ${existing.value.auth} vs ${route.auth})`);
    this.table.ws.set(path, { ...id, value: { ...route, path } });
    this.note(id.owner).wsRoutes.push(path);
  }

  private addMethod(id: { owner: string; builtin: boolean }, method: OwnMethod): void {
    const label = who(id);
    const name = method?.name;
    if (typeof name !== 'string' || !NAME.test(name)) throw refused(`${label}: method name must be 1-64 letters, digits, . _ : -`);
    if (typeof method.handler !== 'function') throw refused(`${label}: method ${name}: handler must be a function`);
    const declared = Object.hasOwn(METHODS, name);
    if (declared && !id.builtin) throw refused(`${label}: method ${name} is one of the gateway's own`);
    if (!declared && !isOperatorScope(method.scope)) throw refused(`${label}: method ${name}: scope must be an operator scope`);
    if (!declared && method.params !== undefined && !id.builtin) {
      try {
        this.limits.compileSchema(method.params);
      } catch (error) {
        throw refused(`${label}: method ${name}: params is not a valid JSON Schema (${(error as Error).message})`);
      }
    }
    const existing = this.table.methods.get(name);
    if (existing) throw refused(`method ${name} of ${label} conflicts with the method of ${who(existing)}`);
    const scope = declared ? METHODS[name as MethodName].scope : method.scope;
    this.table.methods.set(name, { ...id, value: { name, scope, params: declared ? undefined : method.params, declared, handler: method.handler } });
    this.note(id.owner).methods.push(name);
  }

  private addTool(id: { owner: string; builtin: boolean }, tool: ToolDef): void {
    const label = who(id);
    const name = tool?.name;
    if (typeof name !== 'string' || !NAME.test(name)) throw refused(`${label}: tool name must be 1-64 letters, digits, . _ : -`);
    if (typeof tool.handler !== 'function') throw refused(`${label}: tool ${name}: handler must be a function`);
    if (typeof tool.description !== 'string') throw refused(`${label}: tool ${name}: description must be a string`);
    const existing = this.table.tools.get(name);
    if (existing) throw refused(`tool ${name} of ${label} conflicts with the tool of ${who(existing)}`);
    if (tool.inputSchema !== undefined && !id.builtin) {
      try {
        this.limits.compileSchema(tool.inputSchema);
      } catch (error) {
        throw refused(`${label}: tool ${name}: inputSchema is not a valid JSON Schema (${(error as Error).message})`);
      }
    }
    this.table.tools.set(name, { ...id, value: tool });
    this.note(id.owner).tools.push(name);
  }

  private addChannel(id: { owner: string; builtin: boolean }, channelId: string, kind: ChannelKind): void {
    const label = who(id);
    if (typeof channelId !== 'string' || !CHANNEL_ID.test(channelId)) throw refused(`${label}: channel id must be lower-case letters, digits, _ and -`);
    if (!kind || typeof kind.create !== 'function' || typeof kind.normalizePeer !== 'function') throw refused(`${label}: channel ${channelId} needs create and normalizePeer`);
    const existing = this.table.channels.get(channelId);
    if (existing?.builtin && !id.builtin) throw refused(`${label}: channel ${channelId} is built in`);
    if (existing) throw refused(`channel ${channelId} of ${label} conflicts with the channel of ${who(existing)}`);
    this.table.channels.set(channelId, { ...id, value: kind });
    this.note(id.owner).channels.push(channelId);
  }

  private addJob(id: { owner: string; builtin: boolean }, kind: string, handler: JobHandler, options: JobKindOptions = {}): void {
    const label = who(id);
    const prefix = id.builtin && typeof kind === 'string' && JOB_PREFIX.test(kind);
    if (typeof kind !== 'string' || (!prefix && !NAME.test(kind))) throw refused(`${label}: job kind must be 1-64 letters, digits, . _ : -`);
    if (typeof handler !== 'function') throw refused(`${label}: job ${kind}: handler must be a function`);
    // A kind under another owner's prefix is theirs; an owner may refine its own prefix with kinds of their own.
    const covering = prefix ? undefined : this.table.jobHandler(kind);
    const existing = this.table.jobs.get(kind) ?? (covering?.owner === id.owner ? undefined : covering);
    if (existing?.builtin && !id.builtin) throw refused(`${label}: job kind ${kind} is handled by the gateway itself`);
    if (existing) throw refused(`job kind ${kind} of ${label} conflicts with the handler of ${who(existing)}`);
    this.table.jobs.set(kind, { ...id, value: { run: handler, transactional: options.transactional === true, ordered: options.ordered === true } });
    this.note(id.owner).jobKinds.push(kind);
  }
}
