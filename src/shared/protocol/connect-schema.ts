/**
 * The JSON Schema of `connect` params, with a bound on every field. The
 * device identity's shape is checked here when present; whether one is needed
 * is decided after the shared credential, which is checked first.
 */
import { OPERATOR_SCOPES, ROLES } from './scopes.ts';

const text = (maxLength: number) => ({ type: 'string', minLength: 1, maxLength }) as const;
const names = { type: 'array', maxItems: 256, items: text(128) } as const;

export const connectParamsSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['minProtocol', 'maxProtocol', 'client', 'role', 'scopes'],
  properties: {
    minProtocol: { type: 'integer', minimum: 0, maximum: 1_000_000 },
    maxProtocol: { type: 'integer', minimum: 0, maximum: 1_000_000 },
    client: {
      type: 'object',
      additionalProperties: false,
      required: ['id', 'version', 'platform', 'mode'],
      properties: { id: text(128), version: text(64), platform: text(64), mode: text(32), displayName: text(128) },
    },
    role: { type: 'string', enum: [...ROLES] },
    scopes: { type: 'array', maxItems: OPERATOR_SCOPES.length, uniqueItems: true, items: { type: 'string', enum: [...OPERATOR_SCOPES] } },
    caps: names,
    commands: names,
    permissions: { type: 'object', maxProperties: 256 },
    auth: {
      type: 'object',
      additionalProperties: false,
      properties: { token: text(4096), password: text(4096), deviceToken: text(512), inviteCode: text(64) },
    },
    device: {
      type: 'object',
      additionalProperties: false,
      required: ['id', 'publicKey', 'signature', 'signedAt', 'nonce'],
      properties: { id: text(512), publicKey: text(512), signature: text(512), signedAt: { type: 'number' }, nonce: text(512) },
    },
  },
} as const;
