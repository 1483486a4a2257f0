import type { TokenScope } from '../protocol/scopes.ts';

/** Every protected HTTP route and the scope it needs: the one table the routers read. */
export const ROUTE_SCOPES = {
  'POST /tokens': 'tokens:write',
  'GET /tokens': 'tokens:read',
  'DELETE /tokens/:id': 'tokens:write',
  'GET /jobs': 'jobs:read',
  'GET /jobs/:id': 'jobs:read',
  'POST /tools/invoke': 'tools:invoke',
  'POST /v1/chat/completions': 'inference',
  'POST /v1/responses': 'inference',
  'GET /v1/responses/:id': 'inference',
  'GET /v1/models': 'inference',
  'POST /v1/embeddings': 'inference',
  'POST /v1/audio/transcriptions': 'inference',
  'POST /v1/audio/speech': 'inference',
} as const satisfies Record<string, TokenScope>;

export type ProtectedRoute = keyof typeof ROUTE_SCOPES;
