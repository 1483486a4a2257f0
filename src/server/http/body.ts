import type { IncomingMessage } from 'node:http';
import type { Context } from 'koa';
import { HttpError } from './error-body.ts';

/** The media type of a Content-Type header, lower-cased, without parameters. */
export const mediaType = (header: string | undefined): string => (header ?? '').split(';')[0]!.trim().toLowerCase();

/**
 * Reads a request body as raw bytes up to a limit: 413 past it, announced or
 * streamed (the connection is then closed, since the rest goes unread). The raw
 * bytes matter: signatures are computed over them, never over re-serialised JSON.
 */
export function collectBody(req: IncomingMessage, limit: number, onTooLarge: () => void): Promise<Buffer> {
  const tooLarge = () => {
    onTooLarge();
    return new HttpError(413, `The body is larger than ${limit} bytes.`);
  };
  if (Number(req.headers['content-length']) > limit) return Promise.reject(tooLarge());
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        req.off('data', onData);
        req.resume();
        reject(tooLarge());
        return;
      }
      chunks.push(chunk);
    };
    req.on('data', onData);
    req.once('end', () => resolve(Buffer.concat(chunks, size)));
    req.once('error', reject);
  });
}

/** A Koa route's body, with its content type checked (415) and its size bounded (413). */
export async function readRawBody(ctx: Context, options: { limit: number; types: string[] }): Promise<Buffer> {
  if (!options.types.includes(mediaType(ctx.get('content-type')))) {
    throw new HttpError(415, `Send the body as ${options.types.join(' or ')}${ctx.get('content-type') ? ` (got ${ctx.get('content-type')})` : ''}.`);
  }
  return collectBody(ctx.req, options.limit, () => ctx.set('connection', 'close'));
}

/** Reads a JSON body (400 when it does not parse). */
export async function readJsonBody(ctx: Context, limit: number): Promise<unknown> {
  const raw = await readRawBody(ctx, { limit, types: ['application/json'] });
  try {
    return JSON.parse(raw.toString('utf8'));
  } catch {
    throw new HttpError(400, 'The body is not valid JSON.');
  }
}
