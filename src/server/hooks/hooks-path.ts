/** Where hooks live: hooks.path without trailing slashes. Kept apart so the daemon can route without loading the ingress. */
export const hooksBase = (configured: string): string => configured.replace(/\/+$/, '') || '/';

/** The part of a request path below the hooks base (the hook name, still encoded), or undefined when the path is not a hooks path. */
export function hookPathRest(base: string, url: string | undefined): string | undefined {
  const path = (url ?? '/').split('?')[0]!;
  if (path === base) return '';
  return path.startsWith(`${base}/`) ? path.slice(base.length + 1) : undefined;
}
