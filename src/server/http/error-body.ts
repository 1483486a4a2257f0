import type { Context, Next } from 'koa';

/** Error categories of our HTTP API, by status. */
const CATEGORIES: Record<number, string> = {
  400: 'bad_request',
  401: 'unauthorized',
  403: 'forbidden',
  404: 'not_found',
  405: 'bad_request',
  409: 'conflict',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
  429: 'rate_limited',
  500: 'internal',
  503: 'unavailable',
};

export const categoryOf = (status: number): string => CATEGORIES[status] ?? (status >= 500 ? 'internal' : 'bad_request');

export interface ErrorBody {
  error: string;
  message: string;
  statusCode: number;
}

export const errorBody = (statusCode: number, message: string): ErrorBody => ({ error: categoryOf(statusCode), message, statusCode });

/** An error a handler throws to answer with a status and the error body. */
export class HttpError extends Error {
  readonly status: number;
  readonly headers: Record<string, string>;

  constructor(status: number, message: string, headers: Record<string, string> = {}) {
    super(message);
    this.status = status;
    this.headers = headers;
  }
}

/** The outermost layer: every failure leaves as the error body; unexpected ones say nothing about internals. */
export function errorBodyLayer(onUnexpected: (error: unknown, ctx: Context) => void, envelope: (ctx: Context) => boolean = () => false) {
  return async (ctx: Context, next: Next): Promise<void> => {
    try {
      await next();
    } catch (error) {
      const expose = error instanceof HttpError || (error as { expose?: boolean }).expose === true;
      const status = expose ? ((error as { status?: number }).status ?? 500) : 500;
      if (!expose) onUnexpected(error, ctx);
      ctx.status = status;
      const body = errorBody(status, expose ? (error as Error).message : 'An unexpected error occurred; the gateway log has the details.');
      // Routes that answer {ok: true, ...} say ok: false on every failure, whichever layer refused.
      ctx.body = envelope(ctx) ? { ok: false, ...body } : body;
      if (error instanceof HttpError) ctx.set(error.headers);
    }
  };
}

/** The innermost layer: any path no surface claimed. */
export async function notFoundLayer(ctx: Context): Promise<void> {
  ctx.status = 404;
  ctx.body = errorBody(404, `No route for ${ctx.method} ${ctx.path}.`);
}
