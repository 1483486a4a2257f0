import { closeSync, fstatSync, openSync, renameSync, rmSync, writeSync } from 'node:fs';

export interface LogFileOptions {
  path: string;
  /** Size at which the file is rotated. */
  maxBytes: number;
  /** Rotated files kept: path.1 (newest) to path.N. */
  maxFiles: number;
}

/**
 * The daemon's log file, rotated by size. Writes are synchronous so the last
 * lines before a crash are on disk; the daemon logs little, never per request
 * at info level.
 */
export class LogFile {
  private fd: number;
  private size: number;

  private readonly options: LogFileOptions;

  constructor(options: LogFileOptions) {
    this.options = options;
    this.fd = openSync(options.path, 'a', 0o600);
    this.size = fstatSync(this.fd).size;
  }

  write(chunk: string): boolean {
    const bytes = Buffer.byteLength(chunk);
    if (this.size > 0 && this.size + bytes > this.options.maxBytes) this.rotate();
    writeSync(this.fd, chunk);
    this.size += bytes;
    return true;
  }

  private rotate(): void {
    closeSync(this.fd);
    const { path, maxFiles } = this.options;
    rmSync(`${path}.${maxFiles}`, { force: true });
    for (let index = maxFiles - 1; index >= 1; index--) {
      try {
        renameSync(`${path}.${index}`, `${path}.${index + 1}`);
      } catch {
        // a gap in the sequence is fine
      }
    }
    renameSync(path, `${path}.1`);
    this.fd = openSync(path, 'a', 0o600);
    this.size = 0;
  }

  close(): void {
    closeSync(this.fd);
  }
}
