import { ExitCode } from './exit-codes.ts';

export interface GatewayErrorOptions {
  /** Process exit code when the error ends a command. */
  exitCode?: ExitCode;
  /** Stable machine-readable code, shown in `--json` errors. */
  code?: string;
  /** Next steps for the user, printed as a "Try this" list. */
  hints?: string[];
  cause?: unknown;
}

/**
 * An error a user can meet: it says what happened and what to do next, and it
 * carries the exit code the command ends with. Messages never contain secrets.
 */
export class GatewayError extends Error {
  readonly exitCode: ExitCode;
  readonly code: string;
  readonly hints: string[];

  constructor(message: string, options: GatewayErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'GatewayError';
    this.exitCode = options.exitCode ?? ExitCode.failure;
    this.code = options.code ?? codeFor(this.exitCode);
    this.hints = options.hints ?? [];
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
  new GatewayError(message, { exitCode: ExitCode.usage, hints });

export const configError = (message: string, hints?: string[]) =>
  new GatewayError(message, { exitCode: ExitCode.invalidConfig, hints });

export const notFoundError = (message: string, hints?: string[]) =>
  new GatewayError(message, { exitCode: ExitCode.notFound, hints });
