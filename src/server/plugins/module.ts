/**
 * Plugins: modules loaded from outside (`plugins.load`), through the same
 * registration as the gateway's own, at start-up and at every reload.
 */
import { defineModule } from '../kernel/module.ts';
import type { Extension } from '../kernel/module.ts';

export default defineModule({
  id: 'plugins',
  setup(ctx) {
    const profileDir = ctx.daemon.paths.dir;
    ctx.extend(async (generation) => {
      const specs = ctx.config().plugins.load;
      if (specs.length === 0) return [];
      const { importPlugin } = await import('./loader.ts');
      const extensions: Extension[] = [];
      for (const spec of specs) {
        try {
          const loaded = await importPlugin(spec, profileDir, generation);
          extensions.push({ name: loaded.name, source: spec, register: loaded.register });
        } catch (error) {
          extensions.push({ name: spec, source: spec, error: (error as Error).message });
        }
      }
      return extensions;
    });
  },
});
