/** Parts of the OpenAPI document that modules contribute for the routes they serve. */
import { ROUTE_SCOPES } from '../../shared/api/routes.ts';
import type { SchemaName } from '../../shared/api/schemas.ts';

/** A module's part of /openapi.json: path items, and schemas of its own beside the shared ones. */
export interface ApiDocumentPart {
  paths: Record<string, Record<string, unknown>>;
  schemas?: Record<string, Record<string, unknown>>;
}

export const ref = (name: SchemaName | string) => ({ $ref: `#/components/schemas/${name}` });
export const jsonResponse = (name: SchemaName | string, description: string) => ({ description, content: { 'application/json': { schema: ref(name) } } });
export const errorResponse = (description: string) => jsonResponse('Error', description);

/** The answers every protected route may give besides its own. */
export const protectedErrors = {
  400: errorResponse('bad request, or a credential in the query string'),
  401: errorResponse('missing, unknown, expired or revoked credential'),
  403: errorResponse('the credential lacks the scope, which the message names'),
  429: errorResponse('too many requests or failed authentications; see Retry-After'),
};

/** The security requirement of a protected route, from the one table of route scopes. */
export const security = (route: keyof typeof ROUTE_SCOPES) => ({
  security: [{ bearer: [ROUTE_SCOPES[route]] }],
  'x-required-scope': ROUTE_SCOPES[route],
});
