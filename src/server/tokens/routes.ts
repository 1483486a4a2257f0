/** POST /tokens, GET /tokens and DELETE /tokens/:id, with their API description. */
import { ROUTE_SCOPES } from '../../shared/api/routes.ts';
import { errorResponse, jsonResponse, protectedErrors, ref, security } from '../kernel/api-doc.ts';
import { DomainError } from '../kernel/errors.ts';
import type { ModuleContext, Principal } from '../kernel/module.ts';
import type { TokenIssuer } from './issuer.ts';
import { TOKEN_LIST_LIMIT, type TokenStore } from './token-store.ts';

/** GET /tokens?limit=N: an integer from 1 to 1,000 (default 100); nothing else is taken. */
export function listLimit(query: Record<string, string | string[] | undefined>): number {
  const unknown = Object.keys(query).filter((key) => key !== 'limit');
  if (unknown.length > 0) throw new DomainError('invalid', `Unknown query parameters: ${unknown.join(', ')}.`);
  const given = query.limit;
  if (given === undefined) return TOKEN_LIST_LIMIT;
  if (typeof given !== 'string' || !/^\d{1,4}$/.test(given) || Number(given) < 1 || Number(given) > 1000) throw new DomainError('invalid', 'limit must be an integer from 1 to 1000.');
  return Number(given);
}

export function tokenRoutes(ctx: Pick<ModuleContext, 'http' | 'config'>, issuer: TokenIssuer, tokens: TokenStore): void {
  const { http } = ctx;
  http.reserve('/tokens');
  http.document({
    paths: {
      '/tokens': {
        post: {
          summary: 'create a product access token', ...security('POST /tokens'),
          requestBody: { required: true, content: { 'application/json': { schema: ref('TokenCreateRequest') } } },
          responses: { 201: jsonResponse('TokenCreated', 'created; the token is shown once'), ...protectedErrors, 413: errorResponse('body too large'), 415: errorResponse('not JSON') },
        },
        get: {
          summary: "list the caller's tokens, masked: those in force first, then revoked and expired ones until retention", ...security('GET /tokens'),
          parameters: [{ name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 1000, default: TOKEN_LIST_LIMIT } }],
          responses: { 200: jsonResponse('TokenList', 'tokens'), ...protectedErrors },
        },
      },
      '/tokens/{id}': {
        delete: {
          summary: 'revoke a token', ...security('DELETE /tokens/:id'),
          parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }],
          responses: {
            200: jsonResponse('TokenRevoked', 'revoked, with every token made with it'), ...protectedErrors,
            403: errorResponse("the credential lacks the route's scope, or a scope the token to revoke holds"), 404: errorResponse("not one of the caller's tokens"),
          },
        },
      },
    },
  });
  http.route({
    method: 'POST', path: '/tokens', auth: { scope: ROUTE_SCOPES['POST /tokens'] },
    body: { types: ['application/json'], limit: () => ctx.config().gateway.http.maxBodyBytes },
    handler: async (route) => {
      const made = await issuer.create(route.state.principal as Principal, route.received!.value, route.req.socket.remoteAddress);
      route.status = 201;
      route.body = made;
    },
  });
  http.route({
    method: 'GET', path: '/tokens', auth: { scope: ROUTE_SCOPES['GET /tokens'] },
    handler: async (route) => { route.body = await tokens.list((route.state.principal as Principal).subject, listLimit(route.query)); },
  });
  http.route({
    method: 'DELETE', path: '/tokens/:id', auth: { scope: ROUTE_SCOPES['DELETE /tokens/:id'] },
    handler: async (route) => { route.body = await issuer.revoke(route.state.principal as Principal, route.params.id, route.req.socket.remoteAddress); },
  });
}
