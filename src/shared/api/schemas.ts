import { TOKEN_SCOPES } from '../protocol/scopes.ts';

/**
 * JSON Schemas of the job, token and webhook API: the same objects validate
 * requests in the daemon and make up the OpenAPI document at /openapi.json.
 */
type Schema = Record<string, unknown>;

const isoTime: Schema = { type: 'string', format: 'date-time' };
const nullable = (schema: Schema): Schema => ({ anyOf: [schema, { type: 'null' }] });

export const ERROR_CATEGORIES = [
  'bad_request', 'unauthorized', 'forbidden', 'not_found', 'conflict', 'payload_too_large',
  'unsupported_media_type', 'rate_limited', 'internal', 'unavailable', 'insufficient_storage',
] as const;

export const schemas = {
  Error: {
    type: 'object',
    required: ['error', 'message', 'statusCode'],
    additionalProperties: false,
    properties: {
      error: { type: 'string', enum: [...ERROR_CATEGORIES] },
      message: { type: 'string' },
      statusCode: { type: 'integer', minimum: 400, maximum: 599 },
    },
  },
  Probe: {
    type: 'object',
    required: ['ok', 'status'],
    properties: { ok: { type: 'boolean' }, status: { type: 'string', enum: ['live', 'ready', 'starting', 'stopping'] } },
  },
  TokenCreateRequest: {
    type: 'object',
    required: ['name', 'scopes'],
    additionalProperties: false,
    properties: {
      name: { type: 'string', minLength: 1, maxLength: 100, pattern: '\\S' },
      scopes: { type: 'array', minItems: 1, uniqueItems: true, items: { type: 'string', enum: [...TOKEN_SCOPES] } },
      expiresAt: {
        type: 'string', format: 'date-time',
        description: 'default: now + api.tokens.defaultExpiryDays (90 days). A token made with a token expires no later than it: '
          + 'without expiresAt it then ends with that token when sooner, and an expiresAt after that token\'s is refused (400)',
      },
      budget: {
        type: 'object', additionalProperties: false,
        description: 'a cap on what model calls made with the token cost, in models.currency: a day\'s and a calendar month\'s (UTC). '
          + 'Tokens made with it count toward it too; at the cap, inference requests are answered 429 until the period ends',
        properties: { daily: { type: 'number', minimum: 0, maximum: 1_000_000_000 }, monthly: { type: 'number', minimum: 0, maximum: 1_000_000_000 } },
      },
    },
  },
  TokenCreated: {
    type: 'object',
    required: ['id', 'name', 'scopes', 'createdAt', 'expiresAt', 'token'],
    additionalProperties: false,
    properties: {
      id: { type: 'string' }, name: { type: 'string' }, scopes: { type: 'array', items: { type: 'string' } },
      createdAt: isoTime, expiresAt: isoTime,
      budget: { ...nullable({ type: 'object', properties: { daily: { type: 'number' }, monthly: { type: 'number' } } }), description: 'the cap on its spending, or null' },
      token: { type: 'string', pattern: '^gwt_[0-9A-Za-z]{36}$', description: 'shown once' },
    },
  },
  Token: {
    type: 'object',
    required: ['id', 'name', 'scopes', 'createdAt', 'expiresAt', 'lastUsedAt', 'revokedAt', 'parentId', 'masked', 'budget'],
    additionalProperties: false,
    properties: {
      id: { type: 'string' }, name: { type: 'string' }, scopes: { type: 'array', items: { type: 'string' } },
      createdAt: isoTime, expiresAt: isoTime, lastUsedAt: nullable(isoTime), revokedAt: nullable(isoTime),
      parentId: { ...nullable({ type: 'string' }), description: 'the token this one was made with; null for one made with any other credential' },
      masked: { type: 'string', description: 'prefix and last four characters' },
      budget: { ...nullable({ type: 'object', properties: { daily: { type: 'number' }, monthly: { type: 'number' } } }), description: 'the cap on its spending, or null' },
    },
  },
  TokenList: {
    type: 'object', required: ['tokens'], additionalProperties: false,
    properties: {
      tokens: { type: 'array', items: { $ref: '#/components/schemas/Token' } },
      more: { type: 'boolean', description: 'there are more tokens than the limit: ask with a larger one' },
    },
  },
  TokenRevoked: {
    type: 'object', required: ['id', 'revokedAt', 'alreadyRevoked', 'descendantsRevoked'], additionalProperties: false,
    properties: {
      id: { type: 'string' }, revokedAt: isoTime, alreadyRevoked: { type: 'boolean', description: 'the token had been revoked before; nothing changed' },
      descendantsRevoked: { type: 'integer', minimum: 0, description: 'tokens made with it, directly or not, revoked with it now' },
    },
  },
  Job: {
    type: 'object',
    required: ['id', 'kind', 'status', 'attempts', 'maxAttempts', 'runAt', 'createdAt', 'startedAt', 'finishedAt', 'error', 'result', 'source'],
    additionalProperties: false,
    properties: {
      id: { type: 'string' }, kind: { type: 'string' },
      status: { type: 'string', enum: ['queued', 'running', 'succeeded', 'failed'] },
      attempts: { type: 'integer', minimum: 0 }, maxAttempts: { type: 'integer', minimum: 1 },
      runAt: isoTime, createdAt: isoTime, startedAt: nullable(isoTime), finishedAt: nullable(isoTime),
      error: nullable({ type: 'string' }), result: {}, source: nullable({ type: 'string' }),
    },
  },
  JobList: {
    type: 'object', required: ['jobs', 'nextCursor'], additionalProperties: false,
    properties: { jobs: { type: 'array', items: { $ref: '#/components/schemas/Job' } }, nextCursor: nullable({ type: 'string' }) },
  },
  DeliveryAccepted: {
    type: 'object', required: ['ok', 'deliveryId', 'jobId', 'duplicate'], additionalProperties: false,
    properties: { ok: { const: true }, deliveryId: { type: 'string' }, jobId: { type: 'string' }, duplicate: { type: 'boolean' } },
  },
  ToolInvokeRequest: {
    type: 'object', required: ['tool'], additionalProperties: false,
    properties: {
      tool: { type: 'string', minLength: 1, maxLength: 64 }, args: { type: 'object' }, sessionKey: { type: 'string' },
      idempotencyKey: { type: 'string', pattern: '^[\\x21-\\x7e]{1,128}$', description: 'also accepted as the Idempotency-Key header; a retry answers the first result' },
      dryRun: { type: 'boolean', description: 'check the tool, policy and args without running it' },
    },
  },
  ToolInvokeResult: {
    type: 'object', required: ['ok', 'result'], additionalProperties: false,
    properties: { ok: { const: true }, result: {}, dryRun: { type: 'boolean' }, replayed: { type: 'boolean' } },
  },
  ToolInvokeError: {
    type: 'object', required: ['ok', 'error', 'message', 'statusCode'], additionalProperties: false,
    properties: { ok: { const: false }, error: { type: 'string' }, message: { type: 'string' }, statusCode: { type: 'integer' } },
  },
} as const satisfies Record<string, Schema>;

export type SchemaName = keyof typeof schemas;
