import type { IncomingMessage } from 'node:http';
import type { Context } from 'koa';
import { HttpError } from './error-body.ts';

/** The media type of a Content-Type header, lower-cased, without parameters. */
export const mediaType = (header: string | undefined): string => (header ?? '').split(';')[0]!.trim().toLowerCase();

/**
 * Past the limit, a body is still read and discarded up to this size, so the
 * client finishes sending and reads the 413 instead of a reset connection;
 * a larger one is cut off by closing the connection.
 */
const DRAIN_LIMIT = 64 * 1024 * 1024;

/**
 * Reads a request body as raw bytes up to a limit: 413 past it, announced or
 * streamed. The raw bytes matter: signatures are computed over them, never
 * over re-serialised JSON.
 */
export function collectBody(req: IncomingMessage, limit: number, onAbandon: () => void): Promise<Buffer> {
  // Made only when needed: an error captures a stack, which costs more than reading a small body.
  const tooLarge = () => new HttpError(413, `The body is larger than ${limit} bytes.`);
  const announced = Number(req.headers['content-length']);
  if (announced > DRAIN_LIMIT) {
    onAbandon();
    return Promise.reject(tooLarge());
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= limit) {
        chunks.push(chunk);
      } else if (size > DRAIN_LIMIT) {
        onAbandon();
        reject(tooLarge());
        req.destroy();
      }
    });
    req.once('end', () => (size > limit ? reject(tooLarge()) : resolve(Buffer.concat(chunks, size))));
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
