/**
 * The daemon's side of the one error (GatewayError): what each transport
 * answers for it, from its kind (the HTTP status and body, the RPC error).
 * Domain code throws GatewayErrors (DomainError makes one kind first);
 * transports call answerOf/rpcErrorOf and never decide a status themselves.
 */
import { GatewayError, type GatewayErrorOptions } from '../../shared/errors.ts';
import { ERROR_KINDS, kindOfStatus, rpcNeedsKind, type ErrorKind } from '../../shared/error-kinds.ts';
import type { ErrorShape } from '../../shared/protocol/frames.ts';
import { describeFault, storageFaultKind } from '../store/faults.ts';

export type DomainErrorOptions = Omit<GatewayErrorOptions, 'kind'>;

/** A failure a caller can act on, made kind first: the gateway's one error (GatewayError). */
export class DomainError extends GatewayError {
  constructor(kind: ErrorKind, message: string, options: DomainErrorOptions = {}) {
    super(message, { ...options, kind });
    this.name = 'DomainError';
  }
}

/** Too many requests or failures: 429 with Retry-After. */
export const rateLimited = (retryAfterMs: number, what = 'Too many requests'): DomainError => {
  const seconds = Math.max(1, Math.ceil(retryAfterMs / 1000));
  return new DomainError('rate_limited', `${what}; try again in ${seconds} s.`, {
    headers: { 'retry-after': String(seconds) }, details: { retryAfterMs }, retryable: true,
  });
};

/**
 * A tool call that ends its agent's run for now (the ask tool): the run ends
 * as waiting, holding no run slot, and resumes as a new run of its session
 * once the call's result is recorded there. `result` is what the run reports
 * of the call meanwhile.
 */
export class RunSuspended extends Error {
  readonly result: unknown;

  constructor(result: unknown) {
    super('the run waits for the result of a tool call');
    this.name = 'RunSuspended';
    this.result = result;
  }
}

const GENERIC = 'An unexpected error occurred; the gateway log has the details.';

/** A file or folder name longer than the file system takes: the caller's to shorten (the path itself is not repeated). */
export const nameTooLong = (cause?: unknown): DomainError => new DomainError('invalid',
  'A file or folder name in the request is longer than the file system takes (255 bytes a name, 4,096 a whole path); use a shorter one.', { code: 'name_too_long', ...(cause ? { cause } : {}) });

/**
 * Any thrown value as a domain error. `unexpected` is true for failures no
 * caller should see the inside of (they answer internal with a generic message,
 * and the caller logs them).
 */
export function toDomainError(error: unknown): { error: GatewayError; unexpected: boolean } {
  if (error instanceof GatewayError) return { error, unexpected: error.kind === 'internal' && error.message === GENERIC };
  // A status of 400-499 from a plugin's or a library's error (Koa's http-errors mark theirs expose).
  const status = (error as { status?: unknown } | null)?.status;
  // The storage under the daemon failed (a full disk): the caller can try again later, and nothing of the request was kept.
  const fault = storageFaultKind(error);
  if (fault) {
    return {
      error: new DomainError('unavailable', `The gateway cannot store anything now: ${describeFault(fault)}. Nothing of this request was recorded; send it again later.`, {
        code: 'storage_unavailable', headers: { 'retry-after': '30' }, retryable: true, cause: error,
      }),
      unexpected: false,
    };
  }
  // A file or folder name past what the file system takes (255 bytes, 4,096 a path) came with the request: the caller's to shorten.
  if ((error as NodeJS.ErrnoException | null)?.code === 'ENAMETOOLONG') return { error: nameTooLong(error), unexpected: false };
  if (typeof status === 'number' && status >= 400 && status < 500) {
    const headers = (error as { headers?: unknown }).headers;
    return {
      error: new DomainError(kindOfStatus(status), String((error as Error).message ?? ''), {
        headers: headers && typeof headers === 'object' ? (headers as Record<string, string>) : undefined, cause: error,
      }),
      unexpected: false,
    };
  }
  return { error: new DomainError('internal', GENERIC, { cause: error }), unexpected: true };
}

/** The body of an HTTP error on our own API. */
export interface ErrorBody {
  error: string;
  message: string;
  statusCode: number;
}

/** The common error body, the one place it is built: a kind's category and status (a status of its own for the few HTTP has no kind for). */
export const errorBodyOf = (kind: ErrorKind, message: string, status: number = ERROR_KINDS[kind].status): ErrorBody => ({ error: ERROR_KINDS[kind].category, message, statusCode: status });

export const errorBody = (error: GatewayError): ErrorBody => errorBodyOf(error.kind, error.message, error.status);

/** 405 for a method a path is not served with, naming the methods it is (Allow). */
export const methodNotAllowed = (method: string | undefined, allowed: readonly string[]): DomainError =>
  new DomainError('method_not_allowed', `${method} is not allowed here; use ${allowed.join(', ')}.`, { headers: { allow: allowed.join(', ') } });

/** What an HTTP transport answers for an error. */
export function answerOf(error: GatewayError): { status: number; body: ErrorBody; headers: Record<string, string> } {
  return { status: error.status, body: errorBody(error), headers: error.headers };
}

/** What the control plane answers for an error. */
export function rpcErrorOf(error: GatewayError): ErrorShape {
  const details = {
    ...(rpcNeedsKind(error.kind) ? { kind: error.kind } : {}),
    ...(error.reason !== undefined && error.reason !== error.kind ? { reason: error.reason } : {}),
    ...(error.hints.length ? { hints: error.hints } : {}),
    ...error.details,
  };
  return {
    code: ERROR_KINDS[error.kind].rpc,
    message: error.message,
    ...(Object.keys(details).length > 0 ? { details } : {}),
    ...(error.retryable === undefined ? {} : { retryable: error.retryable }),
  };
}
