import { ERROR_KINDS, kindOfRpcError } from '../shared/error-kinds.ts';
import type { ExitCode } from '../shared/exit-codes.ts';
import type { ErrorCode } from '../shared/protocol/error-codes.ts';

/**
 * The exit code of a command that met an RPC error: the one the error's kind
 * means (the kind it names, else the one its code means), from the one
 * catalog the daemon answers by.
 */
export function exitCodeForRpcError(code: ErrorCode, details?: Record<string, unknown>): ExitCode {
  return ERROR_KINDS[kindOfRpcError(code, details)].exit;
}
