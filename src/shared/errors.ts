import { ERROR_KINDS, type ErrorKind } from './error-kinds.ts';
import { ExitCode } from './exit-codes.ts';

export interface GatewayErrorOptions {
  /**
   * What kind of failure this is (shared/error-kinds.ts): the kind alone
   * decides its HTTP status and body, its RPC error code and the exit code of
   * a command that meets it. Without one: unavailable (it cannot be done now).
   */
  kind?: ErrorKind;
  /** The exit code, for what no kind says on its own: the daemon is not running (3), or is stale (4). */
  exitCode?: ExitCode;
  /** Stable machine-readable code, shown in `--json` errors and RPC details. */
  code?: string;
  /** Next steps for the user, printed as a "Try this" list. */
  hints?: string[];
  /** Extra facts for RPC clients (never a secret). */
  details?: Record<string, unknown>;
  /** Headers an HTTP answer carries (Retry-After, Allow, WWW-Authenticate). */
  headers?: Record<string, string>;
  retryable?: boolean;
  cause?: unknown;
}

/**
 * The one error of the gateway: a failure a user can meet, of one kind, that
 * says what happened and what to do next. The daemon answers it on every
 * transport from its kind (server/kernel/errors.ts), and a command ends with
 * its exit code. Messages never contain secrets.
 */
export class GatewayError extends Error {
  readonly kind: ErrorKind;
  readonly exitCode: ExitCode;
  /** The code `--json` shows: its own, else its exit code's name (USAGE, NOT_FOUND...). */
  readonly code: string;
  /** A stable code of this particular failure, when it has one of its own (storage_unavailable, run_aborted). */
  readonly reason?: string;
  readonly hints: string[];
  readonly details?: Record<string, unknown>;
  readonly headers: Record<string, string>;
  readonly retryable?: boolean;

  constructor(message: string, options: GatewayErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'GatewayError';
    this.kind = options.kind ?? 'unavailable';
    this.exitCode = options.exitCode ?? ERROR_KINDS[this.kind].exit;
    this.reason = options.code;
    this.code = options.code ?? codeFor(this.exitCode);
    this.hints = options.hints ?? [];
    this.details = options.details;
    this.headers = options.headers ?? {};
    this.retryable = options.retryable;
  }

  /** The HTTP status of its kind. */
  get status(): number {
    return ERROR_KINDS[this.kind].status;
  }
}

function codeFor(exitCode: ExitCode): string {
  switch (exitCode) {
    case ExitCode.usage: return 'USAGE';
    case ExitCode.notRunning: return 'NOT_RUNNING';
    case ExitCode.stale: return 'STALE';
    case ExitCode.notFound: return 'NOT_FOUND';
    case ExitCode.invalidConfig: return 'INVALID_CONFIG';
    default: return 'FAILURE';
  }
}

/** Any thrown value as a GatewayError: itself when it is one, else a failure (exit 1) with its message. */
export const asGatewayError = (error: unknown): GatewayError =>
  error instanceof GatewayError ? error : new GatewayError((error as Error)?.message || String(error), { cause: error });

/** What a failed command prints with --json: one document on stdout. */
export interface ErrorJson {
  error: { code: string; message: string; exitCode: number; hints: string[] };
}

export const errorJson = (failure: GatewayError): ErrorJson => ({
  error: { code: failure.code, message: failure.message, exitCode: failure.exitCode, hints: failure.hints },
});

/** What a failed command prints on stderr: the message, then the next steps. */
export const errorText = (failure: GatewayError): string =>
  `Error: ${failure.message}${failure.hints.length > 0 ? `\nTry this:\n${failure.hints.map((hint) => `  ${hint}`).join('\n')}` : ''}\n`;

export const usageError = (message: string, hints?: string[]) =>
  new GatewayError(message, { kind: 'invalid', exitCode: ExitCode.usage, hints });

export const configError = (message: string, hints?: string[]) =>
  new GatewayError(message, { kind: 'invalid_config', hints });

export const notFoundError = (message: string, hints?: string[]) =>
  new GatewayError(message, { kind: 'not_found', hints });
