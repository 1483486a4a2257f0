/** Scopes of WebSocket clients. The gateway's own credential holds all of them. */
export const OPERATOR_SCOPES = ['operator.read', 'operator.write', 'operator.pairing', 'operator.admin'] as const;
export type OperatorScope = (typeof OPERATOR_SCOPES)[number];

/** Scopes of product access tokens on the HTTP API. */
export const TOKEN_SCOPES = ['tokens:read', 'tokens:write', 'jobs:read', 'jobs:write', 'tools:invoke', 'inference', 'metrics', 'admin'] as const;
export type TokenScope = (typeof TOKEN_SCOPES)[number];

export const ROLES = ['operator', 'node'] as const;
export type Role = (typeof ROLES)[number];

export const isOperatorScope = (value: unknown): value is OperatorScope =>
  typeof value === 'string' && (OPERATOR_SCOPES as readonly string[]).includes(value);
