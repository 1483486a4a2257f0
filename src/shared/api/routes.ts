import type { TokenScope } from '../protocol/scopes.ts';

/** Every protected HTTP route and the scope it needs: the one table the routers read. */
export const ROUTE_SCOPES = {
  'POST /tokens': 'tokens:write',
  'GET /tokens': 'tokens:read',
  'DELETE /tokens/:id': 'tokens:write',
  'GET /jobs': 'jobs:read',
  'GET /jobs/:id': 'jobs:read',
  'POST /tools/invoke': 'tools:invoke',
} as const satisfies Record<string, TokenScope>;

export type ProtectedRoute = keyof typeof ROUTE_SCOPES;
