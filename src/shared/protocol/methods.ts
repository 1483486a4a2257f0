/**
 * Every RPC method of the gateway: the scope it needs and the JSON Schema of
 * its params, declared once. The daemon checks params against these schemas
 * before a handler runs (validators compiled at build time); the CLI's client
 * and the daemon's handlers take their types from the same declarations, so a
 * wrong name or shape fails to compile. Results are typed in results.ts.
 */
import type { FromSchema } from 'json-schema-to-ts';
import type { OperatorScope } from './scopes.ts';

/** Held by every connection of role node, and only by them: what a node may call. */
export const NODE_SCOPE = 'node';

const id = { type: 'string', minLength: 1, maxLength: 128 } as const;
const channelId = { type: 'string', pattern: '^[a-z0-9][a-z0-9_-]{0,31}$' } as const;
/** A time in ms since 1970, within what a Date can hold. */
const epochMs = { type: 'integer', minimum: 0, maximum: 8_640_000_000_000_000 } as const;
const configKey = { type: 'string', minLength: 1, maxLength: 256 } as const;
const logLevel = { type: 'string', enum: ['fatal', 'error', 'warn', 'info', 'debug', 'trace'] } as const;
const none = { type: 'object', additionalProperties: false, properties: {} } as const;
const object = <const P extends Record<string, unknown>, const R extends readonly string[] = []>(properties: P, required?: R) =>
  ({ type: 'object', additionalProperties: false, properties, required: required ?? ([] as unknown as R) }) as const;

export const METHODS = {
  health: { scope: 'operator.read', params: none },
  status: { scope: 'operator.read', params: none },
  'config.get': { scope: 'operator.read', params: object({ key: configKey }) },
  'config.set': { scope: 'operator.admin', params: object({ key: configKey, value: {} }, ['key', 'value'] as const) },
  'config.unset': { scope: 'operator.admin', params: object({ key: configKey }, ['key'] as const) },
  'secrets.changed': { scope: 'operator.admin', params: object({ name: { type: 'string', minLength: 1, maxLength: 200 } }, ['name'] as const) },
  shutdown: { scope: 'operator.admin', params: none },
  restart: { scope: 'operator.admin', params: none },
  'devices.list': { scope: 'operator.pairing', params: none },
  'devices.approve': { scope: 'operator.pairing', params: object({ requestId: id, latest: { type: 'boolean' } }) },
  'devices.reject': { scope: 'operator.pairing', params: object({ requestId: id }, ['requestId'] as const) },
  'devices.revoke': { scope: 'operator.pairing', params: object({ deviceId: id }, ['deviceId'] as const) },
  'devices.rotate': { scope: 'operator.admin', params: object({ deviceId: id }, ['deviceId'] as const) },
  'devices.invite': {
    scope: 'operator.pairing',
    params: object({
      role: { type: 'string', enum: ['operator', 'node'] },
      scopes: { type: 'array', maxItems: 4, items: { type: 'string', enum: ['operator.read', 'operator.write', 'operator.pairing', 'operator.admin'] } },
      ttlMs: { type: 'integer', minimum: 1000, maximum: 7 * 24 * 60 * 60_000 },
    }),
  },
  'store.status': { scope: 'operator.read', params: none },
  'audit.list': { scope: 'operator.admin', params: object({ since: epochMs, limit: { type: 'integer', minimum: 1, maximum: 1000 } }) },
  'tokens.create': {
    scope: 'operator.admin',
    // The token request's own schema (shared/api/schemas.ts) checks the rest, with messages of its own.
    params: { type: 'object', properties: { name: { type: 'string' }, scopes: { type: 'array', items: { type: 'string' } }, expiresAt: { type: 'string' }, budget: { type: 'object' } } },
  },
  'tokens.list': { scope: 'operator.read', params: object({ limit: { type: 'integer', minimum: 1, maximum: 1000 } }) },
  'tokens.revoke': { scope: 'operator.admin', params: object({ id }, ['id'] as const) },
  'jobs.list': {
    scope: 'operator.read',
    params: object({
      status: { type: 'string', enum: ['queued', 'running', 'succeeded', 'failed'] },
      kind: { type: 'string', minLength: 1, maxLength: 200 },
      limit: { type: 'integer', minimum: 1, maximum: 200 },
      cursor: { type: 'string', minLength: 1, maxLength: 200 },
    }),
  },
  'jobs.get': { scope: 'operator.read', params: object({ id }, ['id'] as const) },
  'jobs.retry': { scope: 'operator.write', params: object({ id }, ['id'] as const) },
  'skills.upload': {
    scope: 'operator.admin',
    params: object({
      upload: { type: 'string', pattern: '^up_[A-Za-z0-9_-]{8,40}$' },
      files: {
        type: 'array', maxItems: 500,
        items: object({ path: { type: 'string', minLength: 1, maxLength: 1024 }, data: { type: 'string', maxLength: 1_000_000 }, executable: { type: 'boolean' } }, ['path', 'data'] as const),
      },
    }, ['files'] as const),
  },
  'skills.install': { scope: 'operator.admin', params: object({ upload: { type: 'string', pattern: '^up_[A-Za-z0-9_-]{8,40}$' }, source: { type: 'string', maxLength: 2048 }, replace: { type: 'boolean' } }, ['upload'] as const) },
  'skills.list': { scope: 'operator.read', params: none },
  'skills.show': { scope: 'operator.read', params: object({ name: { type: 'string', minLength: 1, maxLength: 64 }, draft: { type: 'boolean' } }, ['name'] as const) },
  'skills.remove': { scope: 'operator.admin', params: object({ name: { type: 'string', minLength: 1, maxLength: 64 }, draft: { type: 'boolean' } }, ['name'] as const) },
  'skills.approve': { scope: 'operator.admin', params: object({ name: { type: 'string', minLength: 1, maxLength: 64 } }, ['name'] as const) },
  'approvals.list': { scope: 'operator.read', params: none },
  'approvals.decide': { scope: 'operator.admin', params: object({ id, approve: { type: 'boolean' } }, ['id', 'approve'] as const) },
  'automations.list': { scope: 'operator.read', params: object({ limit: { type: 'integer', minimum: 1, maximum: 500 }, cursor: { type: 'string', minLength: 1, maxLength: 64 } }) },
  'automations.get': { scope: 'operator.read', params: object({ id: channelId }, ['id'] as const) },
  'automations.runs': { scope: 'operator.read', params: object({ id: channelId, limit: { type: 'integer', minimum: 1, maximum: 200 } }, ['id'] as const) },
  'automations.run': { scope: 'operator.write', params: object({ id: channelId }, ['id'] as const) },
  'metrics.summary': { scope: 'operator.read', params: none },
  'nodes.list': { scope: 'operator.read', params: none },
  'nodes.invoke': {
    scope: 'operator.write',
    params: object({
      node: { type: 'string', minLength: 1, maxLength: 200 }, command: { type: 'string', minLength: 1, maxLength: 128 }, args: {},
      timeoutMs: { type: 'integer', minimum: 100, maximum: 10 * 60_000 },
    }, ['node', 'command'] as const),
  },
  'node.invoke.result': {
    scope: NODE_SCOPE,
    params: object({ invocationId: id, ok: { type: 'boolean' }, result: {}, error: { type: 'string', maxLength: 4000 } }, ['invocationId', 'ok'] as const),
  },
  'channels.list': { scope: 'operator.read', params: none },
  'channels.status': { scope: 'operator.read', params: none },
  'pair.list': { scope: 'operator.pairing', params: object({ channel: channelId }) },
  'pair.approve': { scope: 'operator.pairing', params: object({ channel: channelId, code: id, notify: { type: 'boolean' } }, ['channel', 'code'] as const) },
  'pair.reject': { scope: 'operator.pairing', params: object({ channel: channelId, code: id }, ['channel', 'code'] as const) },
  'pair.revoke': { scope: 'operator.pairing', params: object({ channel: channelId, sender: id }, ['channel', 'sender'] as const) },
  'pair.allowed': { scope: 'operator.pairing', params: object({ channel: channelId }) },
  'sessions.list': { scope: 'operator.read', params: object({ channel: channelId, limit: { type: 'integer', minimum: 1, maximum: 1000 } }) },
  'sessions.history': {
    scope: 'operator.read',
    params: object({
      key: { type: 'string', minLength: 1, maxLength: 256 }, limit: { type: 'integer', minimum: 1, maximum: 1000 }, before: { type: 'integer', minimum: 1 },
    }, ['key'] as const),
  },
  'message.send': {
    scope: 'operator.write',
    params: object({
      channel: channelId, to: id, text: { type: 'string' }, account: channelId,
      // A file of an agent's workspace (the channel's agent's, or the one named), sent with the text as its caption.
      file: { type: 'string', minLength: 1, maxLength: 4096 }, agent: channelId,
    }, ['channel', 'to', 'text'] as const),
  },
  'message.react': {
    scope: 'operator.write',
    params: object({ channel: channelId, to: id, messageId: id, emoji: { type: 'string', minLength: 1, maxLength: 32 }, account: channelId }, ['channel', 'to', 'messageId', 'emoji'] as const),
  },
  reload: { scope: 'operator.admin', params: none },
  'plugins.list': { scope: 'operator.read', params: none },
  'tools.catalog': { scope: 'operator.read', params: none },
  'overlay.status': { scope: 'operator.read', params: none },
  'discovery.status': { scope: 'operator.read', params: none },
  'models.list': { scope: 'operator.read', params: none },
  'usage.summary': { scope: 'operator.read', params: object({ since: epochMs }) },
  'agents.list': { scope: 'operator.read', params: none },
  'agent.run': {
    scope: 'operator.write',
    params: object({
      agent: { type: 'string', pattern: '^[a-z0-9][a-z0-9_-]{0,31}$' },
      sessionKey: { type: 'string', minLength: 1, maxLength: 256 },
      message: { type: 'string', minLength: 1, maxLength: 100_000 },
      /** An id the caller chooses, so it can tell its run's events apart before the answer comes. */
      runId: { type: 'string', pattern: '^[A-Za-z0-9_-]{8,64}$' },
    }, ['message'] as const),
  },
  'agent.abort': { scope: 'operator.write', params: object({ runId: id, sessionKey: { type: 'string', minLength: 1, maxLength: 256 } }) },
  'mcp.list': { scope: 'operator.read', params: none },
  'mcp.tools': { scope: 'operator.read', params: object({ name: channelId }, ['name'] as const) },
  'mcp.login': { scope: 'operator.admin', params: object({ name: channelId }, ['name'] as const) },
  'mcp.logout': { scope: 'operator.admin', params: object({ name: channelId }, ['name'] as const) },
  'logs.tail': { scope: 'operator.admin', params: object({ lines: { type: 'integer', minimum: 1, maximum: 1000 }, level: logLevel, text: { type: 'string', maxLength: 200 } }) },
  'logs.follow': { scope: 'operator.admin', params: object({ level: logLevel }) },
  'logs.unfollow': { scope: 'operator.admin', params: none },
  'config.schema': { scope: 'operator.read', params: none },
  'config.patch': {
    scope: 'operator.admin',
    params: object({
      changes: {
        type: 'array', minItems: 1, maxItems: 500,
        items: object({ key: configKey, value: {}, unset: { type: 'boolean' } }, ['key'] as const),
      },
      dryRun: { type: 'boolean' },
    }, ['changes'] as const),
  },
  'tools.invoke': {
    scope: 'operator.write',
    params: object({
      tool: { type: 'string', minLength: 1, maxLength: 64 },
      args: { type: 'object' },
      sessionKey: { type: 'string', minLength: 1, maxLength: 256 },
      idempotencyKey: { type: 'string', pattern: '^[\\x21-\\x7e]{1,128}$' },
      dryRun: { type: 'boolean' },
    }, ['tool'] as const),
  },
} as const satisfies Record<string, { scope: OperatorScope | typeof NODE_SCOPE; params: Record<string, unknown> }>;

export type MethodName = keyof typeof METHODS;

/** The params of every method, as their schemas declare them (computed once, then looked up). */
export type MethodParamsMap = { [M in MethodName]: FromSchema<(typeof METHODS)[M]['params']> };

/** The params a method takes. */
export type MethodParams<M extends MethodName> = MethodParamsMap[M];

/** Every method and the scope it needs: the one table both sides read. */
export const METHOD_SCOPES = Object.fromEntries(Object.entries(METHODS).map(([name, method]) => [name, method.scope])) as {
  [M in MethodName]: (typeof METHODS)[M]['scope'];
};

/** Events the daemon pushes. */
export const EVENTS = [
  'connect.challenge', 'tick', 'shutdown', 'device.pair.requested', 'device.pair.resolved', 'device.revoked', 'node.invoke',
  'channel.status', 'channel.pair.requested', 'channel.pair.resolved', 'session.message', 'session.wake',
  'agent.delta', 'agent.tool', 'agent.done', 'agent.error', 'mcp.status', 'log.entries', 'jobs.changed', 'automations.fired', 'exec.approval',
] as const;
