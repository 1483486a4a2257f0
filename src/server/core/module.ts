/**
 * The daemon's own surface: health and status, the configuration, secret
 * changes, reload and shutdown over RPC; the audit log; the API contract at
 * /openapi.json; and the gateway.status and gateway.reload tools.
 */
import { ERROR_CATEGORIES, schemas } from '../../shared/api/schemas.ts';
import { getPath } from '../../shared/config/keys.ts';
import { changeConfigKeys, loadConfig } from '../../shared/config/profile-config.ts';
import { configSchema, LIVE_KEYS, READ_ONLY_KEYS, RELOAD_KEYS } from '../../shared/config/schema.ts';
import type { PluginSummary, StatusPayload } from '../../shared/protocol/results.ts';
import { isSecretName } from '../../shared/secrets/names.ts';
import channelsModule from '../channels/module.ts';
import { errorResponse, jsonResponse } from '../kernel/api-doc.ts';
import { DomainError } from '../kernel/errors.ts';
import { defineModule, type ModuleContext, type RpcClient } from '../kernel/module.ts';
import { startMemoryReducer } from './memory-reducer.ts';
import { restartSelf } from './self-restart.ts';
import { restoreTiering } from './tiering.ts';

function pluginSummary(ctx: ModuleContext): PluginSummary {
  const { plugins, lastReload } = ctx.daemon.plugins();
  return {
    loaded: plugins.filter((p) => p.status === 'loaded' && !p.builtin).map((p) => p.name),
    errors: plugins.filter((p) => p.status === 'error').map((p) => ({ plugin: p.name, error: p.error! })),
    lastReload,
  };
}

function status(ctx: ModuleContext): StatusPayload {
  const { daemon } = ctx;
  const problems = daemon.problems();
  return {
    profile: daemon.profile,
    state: 'running',
    readiness: daemon.readiness(),
    pid: process.pid,
    port: daemon.port,
    bind: daemon.bind.mode,
    host: daemon.bind.host,
    url: daemon.url,
    version: daemon.version,
    instanceId: daemon.instanceId,
    startedAt: daemon.startedAt,
    uptimeMs: Date.now() - daemon.startedAt,
    // Empty when the daemon logs to stdout only (its supervisor's journal keeps the log).
    logFile: daemon.logFile ?? '',
    secretStore: daemon.secretStore,
    authMode: ctx.config().gateway.auth.mode,
    connections: ctx.connections.count(),
    plugins: pluginSummary(ctx),
    ...(Object.keys(problems).length > 0 ? { problems } : {}),
    memory: (({ rss, heapUsed, heapTotal, external }) => ({ rss, heapUsed, heapTotal, external }))(process.memoryUsage()),
  };
}

const HTTP_METHODS = new Set(['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace']);

/**
 * The answers any operation can give whatever it documents itself, each in the
 * error body the operation uses (its own 400's, else the API's): 405 for
 * another method on its path (with Allow), 415 for a body that is not JSON
 * where it takes JSON, 503 while the gateway cannot store (a full disk) or is stopping.
 */
function withCommonAnswers(item: Record<string, unknown>): Record<string, unknown> {
  const completed: Record<string, unknown> = {};
  for (const [method, operation] of Object.entries(item)) {
    if (!HTTP_METHODS.has(method) || !operation || typeof operation !== 'object') {
      completed[method] = operation;
      continue;
    }
    const { responses = {}, requestBody } = operation as { responses?: Record<string, { content?: Record<string, { schema?: unknown }> }>; requestBody?: { content?: Record<string, unknown> } };
    const own = Object.entries(responses).find(([status]) => status.startsWith('4'))?.[1]?.content?.['application/json']?.schema ?? { $ref: '#/components/schemas/Error' };
    const answer = (description: string) => ({ description, content: { 'application/json': { schema: own } } });
    completed[method] = {
      ...operation,
      responses: {
        400: answer('a credential in the query string, which is never accepted'),
        ...(requestBody?.content?.['application/json'] ? { 415: answer('the body is not sent as application/json') } : {}),
        405: answer('another method on this path; Allow names the methods it serves'),
        503: answer('the gateway cannot store now (its disk is full) or is stopping; see Retry-After'),
        ...responses,
      },
    };
  }
  return completed;
}

/** The OpenAPI 3.1 document of the HTTP API: what every module documented, with the schemas that validate requests. */
function apiDocument(ctx: ModuleContext): Record<string, unknown> {
  const parts = ctx.daemon.apiDocument();
  const paths = Object.fromEntries(Object.entries(parts.paths).sort(([a], [b]) => a.localeCompare(b)).map(([path, item]) => [path, withCommonAnswers(item)]));
  return {
    openapi: '3.1.0',
    info: {
      title: 'gateway HTTP API',
      version: ctx.daemon.version,
      description: `Errors answer {error, message, statusCode} with error one of ${ERROR_CATEGORIES.join(', ')}.`,
    },
    components: {
      schemas: { ...schemas, ...parts.schemas },
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'the gateway credential, a product access token (gwt_...), a JWT of the configured issuer or the service key; never in a query string' },
        hubSignature: { type: 'apiKey', in: 'header', name: 'X-Hub-Signature-256', description: 'sha256=<hex HMAC-SHA256 of the raw body>' },
        hooksToken: { type: 'http', scheme: 'bearer', description: 'the hooks token (gateway hooks token set), also accepted as x-gateway-token; never the gateway credential' },
      },
    },
    paths,
  };
}

export default defineModule({
  id: 'core',
  needs: [channelsModule],
  setup(ctx) {
    const { daemon, store } = ctx;
    const { channels } = ctx.use(channelsModule);
    const audit = (kind: string, client: RpcClient, subject?: string) => store.audit(kind, { actor: client.deviceId, subject, address: client.address });

    ctx.rpc.method({ name: 'health', handler: () => ({ ok: daemon.readiness() === 'ready', status: daemon.readiness() }) });
    // What keeps the daemon from storing (a full disk) makes it unready, says why, and clears when writes can work again.
    ctx.readiness.check('storage', () => store.health.problem(daemon.paths.dir));
    store.health.onChange((fault) => {
      if (fault) ctx.log.warn({ fault: fault.kind, detail: fault.detail }, 'the gateway cannot store: requests that need to are answered 503 until it can');
      else ctx.log.info('the gateway can store again');
    });
    ctx.rpc.method({ name: 'status', handler: () => status(ctx) });
    ctx.rpc.method({
      name: 'config.get',
      handler: ({ key }) => {
        const { raw, effective } = loadConfig(daemon.paths);
        if (key === undefined) return { config: effective, set: raw };
        return { key, value: getPath(effective, key), source: getPath(raw, key) === undefined ? 'default' : 'config' };
      },
    });
    /** Writes changes together (or checks them, with dryRun) and applies them when the file is whole. */
    const change = async (list: { key: string; value: unknown }[], client: RpcClient, dryRun = false) => {
      // Refused: what the change would newly leave a module unable to do (a problem it already had is not this change's).
      const before = new Set(daemon.configProblems(ctx.config()));
      const changed = await changeConfigKeys(daemon.paths, list, { dryRun, check: (next) => daemon.configProblems(next).filter((problem) => !before.has(problem)) });
      if (dryRun) return changed;
      // A file mended only part of the way is not applied: the daemon keeps the settings it has.
      if (!changed.some((one) => one.remainingProblems)) daemon.applyConfig(loadConfig(daemon.paths).effective);
      const removed = list.every((one) => one.value === undefined);
      ctx.log.info({ ...(list.length === 1 ? { key: list[0]!.key } : { keys: list.map((one) => one.key) }), restartRequired: changed.some((one) => one.restartRequired), client: client.clientId }, removed ? 'configuration key removed' : 'configuration changed');
      for (const { key } of list) audit('config.changed', client, key);
      return changed;
    };
    ctx.rpc.method({ name: 'config.set', handler: async ({ key, value }, client) => (await change([{ key, value }], client))[0]! });
    ctx.rpc.method({ name: 'config.unset', handler: async ({ key }, client) => (await change([{ key, value: undefined }], client))[0]! });
    ctx.rpc.method({
      name: 'config.patch',
      handler: async ({ changes, dryRun = false }, client) => {
        const missing = changes.find((one) => !one.unset && one.value === undefined);
        if (missing) throw new DomainError('invalid', `config.patch: the change of ${missing.key} needs a value, or unset: true.`);
        const changed = await change(changes.map(({ key, value, unset }) => ({ key, value: unset ? undefined : value })), client, dryRun);
        return {
          changes: changed, dryRun,
          restartRequired: changed.some((one) => one.restartRequired), reloadRequired: changed.some((one) => one.reloadRequired),
        };
      },
    });
    ctx.rpc.method({
      name: 'config.schema',
      handler: () => ({ schema: configSchema as unknown as Record<string, unknown>, liveKeys: [...LIVE_KEYS], reloadKeys: [...RELOAD_KEYS], readOnlyKeys: Object.keys(READ_ONLY_KEYS) }),
    });
    ctx.rpc.method({
      name: 'secrets.changed',
      handler: async ({ name }, client) => {
        if (!isSecretName(name)) throw new DomainError('invalid', 'params.name must be a secret name.');
        ctx.log.info({ secretName: name, client: client.clientId }, 'secret changed');
        audit('secret.changed', client, name);
        await daemon.secretChanged(name);
        return { name, applied: true };
      },
    });
    ctx.rpc.method({
      name: 'reload',
      handler: (_params, client) => {
        audit('daemon.reload', client);
        return daemon.reload(`rpc from ${client.clientId}`);
      },
    });
    ctx.rpc.method({ name: 'plugins.list', handler: () => daemon.plugins() });
    ctx.rpc.method({
      name: 'shutdown',
      handler: (_params, client) => {
        ctx.log.info({ client: client.clientId, address: client.address }, 'shutdown requested over RPC');
        // Answer first, then stop: the caller waits for the process to exit.
        setImmediate(() => void daemon.stop('rpc shutdown'));
        return { stopping: true, pid: process.pid };
      },
    });
    ctx.rpc.method({
      name: 'restart',
      handler: (_params, client) => {
        const { via } = restartSelf(daemon.profile);
        ctx.log.info({ client: client.clientId, address: client.address, via }, 'restart requested over RPC');
        audit('gateway.restart', client, daemon.profile);
        return { restarting: true, pid: process.pid, via };
      },
    });
    // Memory a burst made the process commit goes back once it is idle again; V8 optimises hot code as soon as it is hot.
    let stopMemoryReducer: (() => void) | undefined;
    ctx.onStart(() => {
      stopMemoryReducer = startMemoryReducer(ctx.log);
      // After the other modules' start hooks (start-up still), on the next turn of the event loop.
      setTimeout(() => { if (restoreTiering()) ctx.log.debug('V8 tiering counts restored after start-up'); }, 0).unref();
    });
    ctx.onStop(() => stopMemoryReducer?.());
    ctx.rpc.method({
      name: 'audit.list',
      handler: async ({ since, limit }) => {
        const rows = await store.auditEvents(since ?? 0, limit ?? 200);
        return {
          events: rows.reverse().map((row) => ({
            id: Number(row.id), at: new Date(Number(row.at)).toISOString(), kind: String(row.kind), actor: row.actor, subject: row.subject,
            address: row.address, detail: row.detail === null ? null : JSON.parse(String(row.detail)),
          })),
        };
      },
    });

    let document: string | undefined;
    ctx.http.route({
      method: 'GET', path: '/openapi.json', auth: 'public',
      handler: (http) => {
        document ??= JSON.stringify(apiDocument(ctx));
        http.type = 'application/json';
        http.body = document;
      },
    });
    ctx.http.document({
      paths: {
        '/healthz': { get: { summary: 'liveness', responses: { 200: jsonResponse('Probe', 'live'), 429: errorResponse('too many requests from the address; see Retry-After') } } },
        '/readyz': {
          get: {
            summary: 'readiness; with a valid credential, the checks and their problems too',
            responses: {
              200: jsonResponse('Probe', 'ready'), 503: jsonResponse('Probe', 'starting, stopping or unable to serve'),
              401: errorResponse('a credential that is not valid (none is needed on loopback), or none beyond loopback on an exposed gateway'),
              429: errorResponse('too many requests from the address; see Retry-After'),
            },
          },
        },
        '/openapi.json': { get: { summary: 'this document', responses: { 200: { description: 'OpenAPI 3.1 document' } } } },
      },
    });

    ctx.tools.add({
      name: 'gateway.status',
      description: 'The gateway\'s profile, version, uptime, channels and plugins.',
      inputSchema: { type: 'object', additionalProperties: false, properties: {} },
      handler: () => ({
        profile: daemon.profile, version: daemon.version, pid: process.pid, uptimeMs: Date.now() - daemon.startedAt, url: daemon.url,
        channels: channels.status(), plugins: pluginSummary(ctx),
      }),
    });
    ctx.tools.add({
      name: 'gateway.reload',
      description: 'Re-read the configuration and plugins without a restart.',
      inputSchema: { type: 'object', additionalProperties: false, properties: {} },
      dangerous: true,
      handler: () => daemon.reload('tool gateway.reload'),
    });
  },
});
