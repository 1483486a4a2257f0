import { createReadStream } from 'node:fs';
import { realpath, stat } from 'node:fs/promises';
import { extname, join, sep } from 'node:path';
import type { Context } from 'koa';
import { DomainError } from '../kernel/errors.ts';

const MIME: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.htm': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.txt': 'text/plain; charset=utf-8',
  '.md': 'text/markdown; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.gif': 'image/gif',
  '.webp': 'image/webp',
  '.ico': 'image/x-icon',
  '.wasm': 'application/wasm',
  '.woff': 'font/woff',
  '.woff2': 'font/woff2',
  '.xml': 'application/xml',
  '.pdf': 'application/pdf',
};

export const mimeTypeOf = (file: string): string => MIME[extname(file).toLowerCase()] ?? 'application/octet-stream';

/**
 * The segments of a request path below a mount, each decoded once and checked:
 * no dot segments, no slashes or backslashes hidden in an encoding, no NUL.
 * Undefined for anything that is not a plain path (the caller answers 404).
 */
export function safeSegments(rawPath: string, mount: string): string[] | undefined {
  if (!rawPath.startsWith(mount)) return undefined;
  const rest = rawPath.slice(mount.length);
  const segments: string[] = [];
  for (const raw of rest.split('/')) {
    if (raw === '') continue;
    let segment: string;
    try {
      segment = decodeURIComponent(raw);
    } catch {
      return undefined;
    }
    if (segment === '.' || segment === '..' || /[/\\\0]/.test(segment) || segment.includes('%')) return undefined;
    segments.push(segment);
  }
  return segments;
}

const notFound = () => new DomainError('not_found', 'No such file.');

/** Serves one file below root for a request under mount; symlinks that lead outside root are refused. */
export async function serve(ctx: Context, root: string, mount: string): Promise<void> {
  const rawPath = (ctx.req.url ?? '/').split('?')[0]!;
  const segments = safeSegments(rawPath, mount);
  if (!segments) throw notFound();
  let base: string;
  try {
    base = await realpath(root);
  } catch {
    throw notFound();
  }
  let file = join(base, ...segments);
  try {
    file = await realpath(file);
    if (file !== base && !file.startsWith(base + sep)) throw notFound();
    let info = await stat(file);
    if (info.isDirectory()) {
      if (!rawPath.endsWith('/')) {
        ctx.status = 308;
        ctx.set('location', `${rawPath}/`);
        return;
      }
      file = join(file, 'index.html');
      info = await stat(file);
    }
    if (!info.isFile()) throw notFound();
    ctx.status = 200;
    ctx.set('content-type', mimeTypeOf(file));
    ctx.set('x-content-type-options', 'nosniff');
    ctx.set('cache-control', 'no-cache');
    // HEAD opens nothing: an empty body, and the length the file would have.
    ctx.body = ctx.method === 'HEAD' ? Buffer.alloc(0) : createReadStream(file);
    ctx.length = info.size;
  } catch (error) {
    if (error instanceof DomainError) throw error;
    throw notFound();
  }
}

