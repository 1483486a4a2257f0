import { createReadStream } from 'node:fs';
import { realpath, stat } from 'node:fs/promises';
import { join, sep } from 'node:path';
import type { Context } from 'koa';
import { DomainError } from '../kernel/errors.ts';
import { mimeTypeOf, safeSegments } from '../kernel/static-paths.ts';

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

