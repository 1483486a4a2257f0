import type { BuiltinPlugin } from './host.ts';

/** A built-in plugin serving a folder read-only at /__gateway__/<name>/, behind gateway auth. */
export function staticFolder(name: string, root: () => string): BuiltinPlugin {
  const mount = `/__gateway__/${name}/`;
  return {
    name: `gateway-${name}`,
    register(api) {
      for (const method of ['GET', 'HEAD']) {
        api.http.route({ method, path: mount, match: 'prefix', auth: 'gateway', handler: async (ctx) => (await import('./static-serve.ts')).serve(ctx, root(), mount) });
      }
    },
  };
}
