import type { Context, Next } from 'koa';
import { holds, type HttpAuthenticator } from '../auth/http-auth.ts';
import type { PluginTable } from '../plugins/registry.ts';
import { HttpError } from './error-body.ts';

/**
 * Plugin routes, looked up in the table current when the request arrives: a
 * reload swaps the table, and requests already inside finish on the old one.
 * `gateway` routes need the gateway's own credential (or an admin token);
 * `plugin` routes authenticate the caller themselves.
 */
export function pluginRoutesLayer(table: () => PluginTable, authenticator: HttpAuthenticator) {
  return async (ctx: Context, next: Next): Promise<void> => {
    const current = table();
    const entry = current.route(ctx.method, ctx.path);
    if (!entry) {
      const allowed = current.allowedMethods(ctx.path);
      if (allowed.length > 0 && !allowed.includes('*')) {
        throw new HttpError(405, `${ctx.method} is not allowed here; use ${allowed.join(', ')}.`, { allow: allowed.join(', ') });
      }
      await next();
      return;
    }
    if (entry.value.auth === 'gateway') {
      const principal = await authenticator.authenticate(ctx.req);
      if (!holds(principal, 'admin')) throw new HttpError(403, 'This route needs the gateway\'s own credential.');
      ctx.state.principal = principal;
    }
    ctx.state.plugin = entry.plugin;
    await entry.value.handler(ctx);
  };
}
