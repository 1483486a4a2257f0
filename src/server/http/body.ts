import type { Context } from 'koa';
import { HttpError } from './error-body.ts';

/**
 * Reads a request body as raw bytes, with its content type and size checked:
 * 415 for another type, 413 past the limit (announced or streamed). The raw
 * bytes matter: signatures are computed over them, never over re-serialised JSON.
 */
export async function readRawBody(ctx: Context, options: { limit: number; types: string[] }): Promise<Buffer> {
  if (!ctx.is(options.types)) {
    throw new HttpError(415, `Send the body as ${options.types.join(' or ')}${ctx.get('content-type') ? ` (got ${ctx.get('content-type')})` : ''}.`);
  }
  const announced = Number(ctx.get('content-length'));
  if (announced > options.limit) {
    ctx.set('connection', 'close');
    throw new HttpError(413, `The body is larger than ${options.limit} bytes.`);
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const req = ctx.req;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > options.limit) {
        req.off('data', onData);
        req.resume();
        ctx.set('connection', 'close');
        reject(new HttpError(413, `The body is larger than ${options.limit} bytes.`));
        return;
      }
      chunks.push(chunk);
    };
    req.on('data', onData);
    req.once('end', () => resolve(Buffer.concat(chunks, size)));
    req.once('error', reject);
  });
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
