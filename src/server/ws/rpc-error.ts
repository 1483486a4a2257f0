import type { ErrorCode } from '../../shared/protocol/error-codes.ts';
import type { ErrorShape } from '../../shared/protocol/frames.ts';

/** An error a method handler throws to answer with a protocol error code. */
export class RpcError extends Error {
  readonly code: ErrorCode;
  readonly details?: Record<string, unknown>;
  readonly retryable?: boolean;

  constructor(code: ErrorCode, message: string, details?: Record<string, unknown>, retryable?: boolean) {
    super(message);
    this.code = code;
    this.details = details;
    this.retryable = retryable;
  }

  toShape(): ErrorShape {
    return {
      code: this.code,
      message: this.message,
      ...(this.details ? { details: this.details } : {}),
      ...(this.retryable === undefined ? {} : { retryable: this.retryable }),
    };
  }
}

export const invalidParams = (message: string): RpcError => new RpcError('INVALID_REQUEST', message);

/** A method's params as an object ({} when none were sent); INVALID_REQUEST otherwise. */
export function paramsObject(params: unknown): Record<string, unknown> {
  if (params === undefined || params === null) return {};
  if (typeof params !== 'object' || Array.isArray(params)) throw invalidParams('params must be an object');
  return params as Record<string, unknown>;
}

/** A required id-like string param (1-128 characters). */
export function idParam(params: unknown, name: string): string {
  const value = paramsObject(params)[name];
  if (typeof value !== 'string' || value.length === 0 || value.length > 128) throw invalidParams(`params.${name} must be a non-empty string`);
  return value;
}
