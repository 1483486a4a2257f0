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
