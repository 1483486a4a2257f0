import { pino, type Logger } from 'pino';
import type { LogLevel } from '../shared/config/schema.ts';
import { renderLogLine } from '../shared/log-line.ts';
import { LogFile } from './log-file.ts';

/** Fields that may hold a secret are censored wherever they appear in a log line. */
const REDACT = [
  'token', 'password', 'secret', 'authorization', 'deviceToken', 'inviteCode',
  '*.token', '*.password', '*.secret', '*.authorization', '*.deviceToken', '*.inviteCode',
  'headers.authorization', 'req.headers.authorization', 'params.auth',
];

export interface DaemonLogger {
  logger: Logger;
  /** The profile's log file, unless logging to it is off. */
  file?: LogFile;
  /** Receives each line as it is written (a live tail); returns a function that stops it. */
  tap(listener: (line: string) => void): () => void;
}

/** Where the log goes besides (or instead of) the file: JSON lines, or lines for a person on a terminal. */
export type ConsoleLog = 'json' | 'pretty';

export interface LoggerOptions {
  path: string;
  level: LogLevel;
  maxBytes: number;
  maxFiles: number;
  profile: string;
  /** Write the profile's log file (default true). */
  file?: boolean;
  console?: ConsoleLog;
}

export function createLogger(options: LoggerOptions): DaemonLogger {
  const file = options.file === false ? undefined : new LogFile(options);
  let render: ((line: string) => string) | undefined;
  if (options.console === 'pretty') {
    const color = !process.env.NO_COLOR;
    render = (line) => `${renderLogLine(line.trimEnd(), color)}\n`;
  }
  const toConsole = options.console === undefined ? undefined : (line: string) => {
    // A console that went away (a closed pipe) must not stop the daemon: bin/run.js turns its errors into no-ops.
    process.stdout.write(render ? render(line) : line);
  };
  const taps = new Set<(line: string) => void>();
  const destination = {
    write(line: string): boolean {
      file?.write(line);
      toConsole?.(line);
      for (const tap of taps) tap(line);
      return true;
    },
  };
  const logger = pino(
    {
      level: options.level,
      base: { pid: process.pid, profile: options.profile },
      redact: { paths: REDACT, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    destination,
  );
  return { logger, file, tap: (listener) => { taps.add(listener); return () => taps.delete(listener); } };
}
