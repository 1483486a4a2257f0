/**
 * Domain errors and the one mapping from an error to what each transport
 * answers: the HTTP status and body, the RPC error. Domain code throws only
 * DomainError; transports call answerOf/rpcErrorOf and never decide a status
 * themselves.
 */
import { GatewayError } from '../../shared/errors.ts';
import { ERROR_KINDS, kindOfStatus, rpcNeedsKind, type ErrorKind } from '../../shared/error-kinds.ts';
import { ExitCode } from '../../shared/exit-codes.ts';
import type { ErrorShape } from '../../shared/protocol/frames.ts';
import { describeFault, storageFaultKind } from '../store/faults.ts';

export interface DomainErrorOptions {
  /** A stable machine-readable code for this particular failure (default: the kind). */
  code?: string;
  /** Extra facts for RPC clients (never a secret). */
  details?: Record<string, unknown>;
  /** Headers an HTTP answer carries (Retry-After, Allow, WWW-Authenticate). */
  headers?: Record<string, string>;
  retryable?: boolean;
  cause?: unknown;
}

/** A failure a caller can act on: of one kind, with a message that says what happened and what to do. */
export class DomainError extends Error {
  readonly kind: ErrorKind;
  readonly code: string;
  readonly details?: Record<string, unknown>;
  readonly headers: Record<string, string>;
  readonly retryable?: boolean;

  constructor(kind: ErrorKind, message: string, options: DomainErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'DomainError';
    this.kind = kind;
    this.code = options.code ?? kind;
    this.details = options.details;
    this.headers = options.headers ?? {};
    this.retryable = options.retryable;
  }

  get status(): number {
    return ERROR_KINDS[this.kind].status;
  }
}

/** Too many requests or failures: 429 with Retry-After. */
export const rateLimited = (retryAfterMs: number, what = 'Too many requests'): DomainError => {
  const seconds = Math.max(1, Math.ceil(retryAfterMs / 1000));
  return new DomainError('rate_limited', `${what}; try again in ${seconds} s.`, {
    headers: { 'retry-after': String(seconds) }, details: { retryAfterMs }, retryable: true,
  });
};

const GENERIC = 'An unexpected error occurred; the gateway log has the details.';

const KIND_OF_EXIT: Partial<Record<number, ErrorKind>> = {
  [ExitCode.usage]: 'invalid',
  [ExitCode.notFound]: 'not_found',
  [ExitCode.invalidConfig]: 'invalid_config',
  [ExitCode.notRunning]: 'unavailable',
};

/**
 * Any thrown value as a domain error. `unexpected` is true for failures no
 * caller should see the inside of (they answer internal with a generic message,
 * and the caller logs them).
 */
export function toDomainError(error: unknown): { error: DomainError; unexpected: boolean } {
  if (error instanceof DomainError) return { error, unexpected: error.kind === 'internal' && error.message === GENERIC };
  // Errors of the code the daemon shares with the CLI (the configuration): their exit code names the kind.
  if (error instanceof GatewayError) {
    const kind = KIND_OF_EXIT[error.exitCode] ?? 'conflict';
    // Refused configuration changes say which key each problem is about (the Control UI shows it beside the field).
    const problems = (error as { problems?: unknown }).problems;
    const details = { ...(error.hints.length ? { hints: error.hints } : {}), ...(Array.isArray(problems) ? { problems } : {}) };
    return { error: new DomainError(kind, error.message, { details: Object.keys(details).length ? details : undefined, cause: error }), unexpected: false };
  }
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

export const errorBody = (error: DomainError): ErrorBody => ({ error: ERROR_KINDS[error.kind].category, message: error.message, statusCode: error.status });

/** What an HTTP transport answers for an error. */
export function answerOf(error: DomainError): { status: number; body: ErrorBody; headers: Record<string, string> } {
  return { status: error.status, body: errorBody(error), headers: error.headers };
}

/** What the control plane answers for an error. */
export function rpcErrorOf(error: DomainError): ErrorShape {
  const details = {
    ...(rpcNeedsKind(error.kind) ? { kind: error.kind } : {}),
    ...(error.code !== error.kind ? { reason: error.code } : {}),
    ...error.details,
  };
  return {
    code: ERROR_KINDS[error.kind].rpc,
    message: error.message,
    ...(Object.keys(details).length > 0 ? { details } : {}),
    ...(error.retryable === undefined ? {} : { retryable: error.retryable }),
  };
}
