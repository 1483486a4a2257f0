import { pino, type Logger } from 'pino';
import type { LogLevel } from '../shared/config/schema.ts';
import { LogFile } from './log-file.ts';

/** Fields that may hold a secret are censored wherever they appear in a log line. */
const REDACT = [
  'token', 'password', 'secret', 'authorization', 'deviceToken', 'inviteCode',
  '*.token', '*.password', '*.secret', '*.authorization', '*.deviceToken', '*.inviteCode',
  'headers.authorization', 'req.headers.authorization', 'params.auth',
];

export interface DaemonLogger {
  logger: Logger;
  file: LogFile;
}

export function createLogger(options: { path: string; level: LogLevel; maxBytes: number; maxFiles: number; profile: string }): DaemonLogger {
  const file = new LogFile(options);
  const logger = pino(
    {
      level: options.level,
      base: { pid: process.pid, profile: options.profile },
      redact: { paths: REDACT, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    file,
  );
  return { logger, file };
}
