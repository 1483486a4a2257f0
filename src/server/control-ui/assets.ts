/**
 * Serves the Control UI's built files (dist/ui) from memory: each read once,
 * with the gzip and brotli copies the build made; hashed assets cached for a
 * year, the page and its settings never. Every answer carries the headers
 * that keep the page from being framed, sniffed or given inline script.
 */
import { readFile, readdir } from 'node:fs/promises';
import { createHash } from 'node:crypto';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DomainError } from '../kernel/errors.ts';
import type { DaemonView, RouteContext } from '../kernel/module.ts';
import { mimeTypeOf, safeSegments } from '../kernel/static-paths.ts';
import { originRefusal } from '../auth/browser-origin.ts';

/**
 * Where `npm run build` puts the bundle: the ui folder of the tree this code
 * runs from, dist/ (compiled or bundled, at different depths), or src/ when
 * run from the sources, which hold no bundle.
 */
export const UI_DIR = ((): string => {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (basename(dir) !== 'dist' && basename(dir) !== 'src' && dirname(dir) !== dir) dir = dirname(dir);
  return join(dir, 'ui');
})();

export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': [
    "default-src 'self'", "script-src 'self'", "style-src 'self'", "img-src 'self' data:", "connect-src 'self'", "font-src 'self'",
    "frame-ancestors 'none'", "base-uri 'none'", "object-src 'none'", "form-action 'self'",
  ].join('; '),
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
};

interface Asset {
  type: string;
  etag: string;
  identity: Buffer;
  gzip?: Buffer;
  br?: Buffer;
}

let loaded: Promise<Map<string, Asset>> | undefined;

async function readAsset(file: string): Promise<Asset> {
  const identity = await readFile(file);
  const optional = (suffix: string) => readFile(`${file}${suffix}`).catch(() => undefined);
  const [gzip, br] = await Promise.all([optional('.gz'), optional('.br')]);
  return { type: mimeTypeOf(file), etag: `"${createHash('sha256').update(identity).digest('base64url').slice(0, 22)}"`, identity, gzip, br };
}

/** Every file of the bundle by its path below dist/ui ("index.html", "assets/app-X.js"). */
function assets(): Promise<Map<string, Asset>> {
  loaded ??= (async () => {
    const files = new Map<string, Asset>();
    const page = await readAsset(join(UI_DIR, 'index.html'));
    files.set('index.html', page);
    for (const name of await readdir(join(UI_DIR, 'assets'))) {
      if (/\.(gz|br)$/.test(name)) continue;
      files.set(`assets/${name}`, await readAsset(join(UI_DIR, 'assets', name)));
    }
    return files;
  })();
  // A broken install is said on each request, and a repaired one is picked up without a restart.
  loaded.catch(() => { loaded = undefined; });
  return loaded;
}

function missing(): DomainError {
  return new DomainError('unavailable', `The Control UI's files are missing from this install (${UI_DIR}): rebuild them with "npm run build" in the gateway's folder, or reinstall the gateway.`);
}

/** The encoding to send: brotli, then gzip, as the client accepts them. */
function encodingFor(accept: string, asset: Asset): 'br' | 'gzip' | undefined {
  const accepted = (name: string) => new RegExp(`(^|,)\\s*${name}\\s*(;\\s*q=(?!0(\\.0*)?\\s*(,|$))[0-9.]+)?\\s*(,|$)`, 'i').test(accept);
  if (asset.br && accepted('br')) return 'br';
  if (asset.gzip && accepted('gzip')) return 'gzip';
  return undefined;
}

function send(http: RouteContext, asset: Asset, cacheControl: string): void {
  http.set(SECURITY_HEADERS);
  http.set('cache-control', cacheControl);
  http.set('etag', asset.etag);
  http.set('vary', 'Accept-Encoding');
  http.type = asset.type;
  if (http.get('if-none-match') === asset.etag) {
    http.status = 304;
    return;
  }
  const encoding = encodingFor(http.get('accept-encoding'), asset);
  const body = encoding ? asset[encoding]! : asset.identity;
  if (encoding) http.set('content-encoding', encoding);
  http.status = 200;
  http.body = http.method === 'HEAD' ? Buffer.alloc(0) : body;
  http.length = body.length;
}

export interface ControlUiOptions {
  base: string;
  daemon: DaemonView;
  allowedOrigins: readonly string[];
  authMode: string;
}

export async function serveControlUi(http: RouteContext, kind: 'page' | 'settings' | 'asset', options: ControlUiOptions): Promise<void> {
  const path = (http.req.url ?? '/').split('?')[0]!;
  if (kind === 'page' && !path.endsWith('/')) {
    // Without its slash, the page's relative asset names would resolve one level up.
    http.status = 308;
    http.set('location', options.base);
    return;
  }
  if (kind === 'settings') {
    // A page from another origin may not read how this gateway is set up.
    const refusal = originRefusal(http.get('origin') || undefined, http.get('host') || undefined, options.allowedOrigins);
    if (refusal) throw new DomainError('forbidden', refusal);
    const host = http.get('host');
    const settings = {
      basePath: options.base,
      websocketPath: '/',
      profile: options.daemon.profile,
      version: options.daemon.version,
      authMode: options.authMode,
      // Whether a page at this address may open the WebSocket (a browser sends the page's origin with the upgrade).
      originAllowed: host ? originRefusal(`http://${host}`, host, options.allowedOrigins) === undefined || originRefusal(`https://${host}`, host, options.allowedOrigins) === undefined : true,
    };
    http.set(SECURITY_HEADERS);
    http.set('cache-control', 'no-store');
    http.body = settings;
    return;
  }
  let files: Map<string, Asset>;
  try {
    files = await assets();
  } catch {
    throw missing();
  }
  if (kind === 'page') {
    send(http, files.get('index.html')!, 'no-cache');
    return;
  }
  const segments = safeSegments(path, `${options.base}assets/`);
  const asset = segments && segments.length === 1 ? files.get(`assets/${segments[0]}`) : undefined;
  if (!asset) throw new DomainError('not_found', 'No such file.');
  // Hashed names never change their content: cached for a year. The icon keeps its name, so it is checked.
  send(http, asset, /-[A-Z0-9]{8}\.(js|css)$/.test(segments![0]!) ? 'public, max-age=31536000, immutable' : 'no-cache');
}
