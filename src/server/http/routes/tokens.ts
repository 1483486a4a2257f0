import Router from '@koa/router';
import { ROUTE_SCOPES } from '../../../shared/api/routes.ts';
import { holds, type HttpAuthenticator, type Principal } from '../../auth/http-auth.ts';
import type { TokenStore } from '../../tokens/token-store.ts';
import { parseTokenRequest, TokenRequestError } from '../../tokens/token-request.ts';
import { readJsonBody } from '../body.ts';
import { HttpError } from '../error-body.ts';
import { requireAuth } from '../guards.ts';

export interface TokenRoutesDeps {
  authenticator: HttpAuthenticator;
  tokens: TokenStore;
  maxBodyBytes: () => number;
  defaultExpiryDays: () => number;
  audit: (kind: string, fields: { actor?: string; subject?: string; address?: string; detail?: Record<string, unknown> }) => void;
}

/** POST /tokens, GET /tokens, DELETE /tokens/:id: each owner sees and revokes only its own tokens. */
export function tokenRoutes(deps: TokenRoutesDeps): Router {
  const router = new Router();
  const guard = (route: keyof typeof ROUTE_SCOPES) => requireAuth(deps.authenticator, ROUTE_SCOPES[route]);

  router.post('/tokens', guard('POST /tokens'), async (ctx) => {
    const principal = ctx.state.principal as Principal;
    const body = await readJsonBody(ctx, deps.maxBodyBytes());
    const now = Date.now();
    let request;
    try {
      request = parseTokenRequest(body, { defaultExpiryDays: deps.defaultExpiryDays(), now, grantable: (scope) => holds(principal, scope) });
    } catch (error) {
      if (error instanceof TokenRequestError) throw new HttpError(400, error.message);
      throw error;
    }
    const created = deps.tokens.create(principal.subject, request, now);
    deps.audit('token.created', { actor: principal.subject, subject: created.id, address: ctx.req.socket.remoteAddress, detail: { name: created.name, scopes: created.scopes } });
    ctx.status = 201;
    ctx.body = { id: created.id, name: created.name, scopes: created.scopes, createdAt: created.createdAt, expiresAt: created.expiresAt, token: created.token };
  });

  router.get('/tokens', guard('GET /tokens'), (ctx) => {
    const principal = ctx.state.principal as Principal;
    ctx.body = { tokens: deps.tokens.list(principal.subject) };
  });

  router.delete('/tokens/:id', guard('DELETE /tokens/:id'), (ctx) => {
    const principal = ctx.state.principal as Principal;
    const revoked = deps.tokens.revoke(principal.subject, ctx.params.id!);
    if (!revoked) throw new HttpError(404, `No token ${ctx.params.id} of yours.`);
    deps.audit('token.revoked', { actor: principal.subject, subject: revoked.id, address: ctx.req.socket.remoteAddress });
    ctx.body = { id: revoked.id, revokedAt: revoked.revokedAt };
  });
  return router;
}
