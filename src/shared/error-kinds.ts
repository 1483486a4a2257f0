import { ExitCode } from './exit-codes.ts';
import type { ErrorCode } from './protocol/error-codes.ts';

/**
 * The one catalog of error kinds. Every failure the gateway reports is of one
 * kind, and the kind alone decides its HTTP status and body category, its RPC
 * error code and the exit code of the command that meets it.
 */
export const ERROR_KINDS = {
  invalid: { status: 400, category: 'bad_request', rpc: 'INVALID_REQUEST', exit: ExitCode.usage },
  unauthorized: { status: 401, category: 'unauthorized', rpc: 'UNAUTHORIZED', exit: ExitCode.failure },
  forbidden: { status: 403, category: 'forbidden', rpc: 'FORBIDDEN', exit: ExitCode.failure },
  pairing_required: { status: 403, category: 'forbidden', rpc: 'PAIRING_REQUIRED', exit: ExitCode.failure },
  not_found: { status: 404, category: 'not_found', rpc: 'NOT_FOUND', exit: ExitCode.notFound },
  method_not_allowed: { status: 405, category: 'bad_request', rpc: 'INVALID_REQUEST', exit: ExitCode.usage },
  /** The request is well formed but the thing is not in a state that allows it (retrying a job that has not failed). */
  conflict: { status: 409, category: 'conflict', rpc: 'INVALID_REQUEST', exit: ExitCode.failure },
  too_large: { status: 413, category: 'payload_too_large', rpc: 'INVALID_REQUEST', exit: ExitCode.usage },
  unsupported_media_type: { status: 415, category: 'unsupported_media_type', rpc: 'INVALID_REQUEST', exit: ExitCode.usage },
  rate_limited: { status: 429, category: 'rate_limited', rpc: 'RATE_LIMITED', exit: ExitCode.failure },
  /** The client went away before its request was whole: nobody reads the answer, and it is nobody's error but the client's. */
  client_closed: { status: 499, category: 'client_closed', rpc: 'INVALID_REQUEST', exit: ExitCode.failure },
  /** A setting or a combination of settings the gateway cannot run with. */
  invalid_config: { status: 400, category: 'bad_request', rpc: 'INVALID_REQUEST', exit: ExitCode.invalidConfig },
  internal: { status: 500, category: 'internal', rpc: 'INTERNAL', exit: ExitCode.failure },
  /** A server the gateway called on the caller's behalf (a model provider) failed or did not answer in time. */
  upstream: { status: 502, category: 'unavailable', rpc: 'UNAVAILABLE', exit: ExitCode.failure },
  /** Something the gateway depends on (a channel, an upstream server) cannot serve now. */
  unavailable: { status: 503, category: 'unavailable', rpc: 'UNAVAILABLE', exit: ExitCode.failure },
  /** The place the request writes to has no room left for it (an agent's workspace at tools.exec.workspaceMB). */
  insufficient_storage: { status: 507, category: 'insufficient_storage', rpc: 'INVALID_REQUEST', exit: ExitCode.failure },
} as const satisfies Record<string, { status: number; category: string; rpc: ErrorCode; exit: ExitCode }>;

export type ErrorKind = keyof typeof ERROR_KINDS;

export const isErrorKind = (value: unknown): value is ErrorKind => typeof value === 'string' && Object.hasOwn(ERROR_KINDS, value);

/** The kind an RPC error code means when the error does not name a kind of its own. */
const DEFAULT_KIND: Record<ErrorCode, ErrorKind> = {
  INVALID_REQUEST: 'invalid',
  UNAUTHORIZED: 'unauthorized',
  FORBIDDEN: 'forbidden',
  PAIRING_REQUIRED: 'pairing_required',
  NOT_FOUND: 'not_found',
  UNAVAILABLE: 'unavailable',
  RATE_LIMITED: 'rate_limited',
  INTERNAL: 'internal',
};

/** The kind of an RPC error: the one its details name, else the one its code means. */
export function kindOfRpcError(code: ErrorCode, details?: Record<string, unknown>): ErrorKind {
  return isErrorKind(details?.kind) ? details.kind : DEFAULT_KIND[code];
}

/** Whether an RPC error of this kind must name the kind, because its code alone means another one. */
export const rpcNeedsKind = (kind: ErrorKind): boolean => DEFAULT_KIND[ERROR_KINDS[kind].rpc] !== kind;

/** The kind an HTTP status means (for errors that carry only a status, such as a plugin's). */
export function kindOfStatus(status: number): ErrorKind {
  for (const [kind, entry] of Object.entries(ERROR_KINDS) as [ErrorKind, (typeof ERROR_KINDS)[ErrorKind]][]) {
    if (entry.status === status && kind !== 'pairing_required' && kind !== 'invalid_config') return kind;
  }
  return status >= 500 ? 'internal' : 'invalid';
}
