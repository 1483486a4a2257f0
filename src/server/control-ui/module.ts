/**
 * The Control UI and WebChat: a page and its bundled assets at
 * gateway.controlUi.basePath, and the runtime settings the page fetches. The
 * page holds no data: everything it shows comes over the WebSocket, where the
 * browser is a device like any other. Assets are read on the first request,
 * so start-up does not pay for them.
 */
import { defineModule, type RouteContext } from '../kernel/module.ts';

export default defineModule({
  id: 'control-ui',
  setup(ctx) {
    const { enabled, basePath } = ctx.config().gateway.controlUi;
    if (!enabled) return;
    const base = basePath.endsWith('/') ? basePath : `${basePath}/`;
    const answer = (kind: 'page' | 'settings' | 'asset') => async (http: RouteContext) => {
      const { serveControlUi } = await import('./assets.ts');
      await serveControlUi(http, kind, {
        base, daemon: ctx.daemon, allowedOrigins: ctx.config().gateway.controlUi.allowedOrigins, authMode: ctx.credential.mode,
      });
    };
    for (const method of ['GET', 'HEAD']) {
      ctx.http.route({ method, path: base, auth: 'public', handler: answer('page') });
      ctx.http.route({ method, path: `${base}settings.json`, auth: 'public', handler: answer('settings') });
      ctx.http.route({ method, path: `${base}assets/`, match: 'prefix', auth: 'public', handler: answer('asset') });
    }
  },
});
