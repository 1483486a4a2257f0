import Router from '@koa/router';
import { ROUTE_SCOPES } from '../../../shared/api/routes.ts';
import type { HttpAuthenticator, Principal } from '../../auth/http-auth.ts';
import { parseToolRequest, toolAnswer, ToolError, type ToolRunner } from '../../tools/tool-runner.ts';
import { readJsonBody } from '../body.ts';
import { HttpError } from '../error-body.ts';
import { requireAuth } from '../guards.ts';

/** POST /tools/invoke: {tool, args?, sessionKey?, idempotencyKey?, dryRun?} -> {ok: true, result}. */
export function toolRoutes(deps: { authenticator: HttpAuthenticator; tools: ToolRunner; maxBodyBytes: () => number }): Router {
  const router = new Router();
  router.post('/tools/invoke', requireAuth(deps.authenticator, ROUTE_SCOPES['POST /tools/invoke']), async (ctx) => {
    const principal = ctx.state.principal as Principal;
    const body = await readJsonBody(ctx, deps.maxBodyBytes());
    try {
      const request = parseToolRequest(body);
      const header = ctx.get('idempotency-key');
      if (header && !request.idempotencyKey) request.idempotencyKey = header;
      const outcome = await deps.tools.invoke(request, { name: principal.subject, surface: 'http', admin: principal.scopes === 'all' || principal.scopes.has('admin') });
      ctx.body = toolAnswer(outcome);
    } catch (error) {
      if (error instanceof ToolError) throw new HttpError(error.status, error.message);
      throw error;
    }
  });
  return router;
}
