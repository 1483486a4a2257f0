/**
 * The canvas and a2ui surfaces: folders served read-only at
 * /__gateway__/canvas/ and /__gateway__/a2ui/, behind gateway auth.
 */
import { join } from 'node:path';
import { defineModule, type ModuleContext } from '../kernel/module.ts';

function staticFolder(ctx: ModuleContext, name: string, root: () => string): void {
  const mount = `/__gateway__/${name}/`;
  for (const method of ['GET', 'HEAD']) {
    ctx.http.route({ method, path: mount, match: 'prefix', auth: 'gateway', handler: async (http) => (await import('./static-serve.ts')).serve(http, root(), mount) });
  }
}

export default defineModule({
  id: 'surfaces',
  setup(ctx) {
    const { dir } = ctx.daemon.paths;
    staticFolder(ctx, 'canvas', () => ctx.config().plugins.canvas?.root ?? join(dir, 'canvas'));
    staticFolder(ctx, 'a2ui', () => ctx.config().plugins.a2ui?.root ?? join(dir, 'a2ui'));
  },
});
