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
 * at info level. A write that fails (a full disk) never fails the daemon: the
 * lines are counted, and the first line that can be written again says how
 * many were lost and why.
 */
export class LogFile {
  private fd: number;
  private size: number;
  private lost = 0;
  private lostWhy = '';

  private readonly options: LogFileOptions;

  constructor(options: LogFileOptions) {
    this.options = options;
    this.fd = openSync(options.path, 'a', 0o600);
    this.size = fstatSync(this.fd).size;
  }

  write(chunk: string): boolean {
    try {
      if (this.lost > 0) {
        this.append(`${JSON.stringify({ level: 40, time: new Date().toISOString(), pid: process.pid, msg: `${this.lost} log lines were lost: ${this.lostWhy}` })}\n`);
        this.lost = 0;
      }
      this.append(chunk);
    } catch (error) {
      this.lost++;
      this.lostWhy = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    }
    return true;
  }

  private append(chunk: string): void {
    const bytes = Buffer.byteLength(chunk);
    if (this.size > 0 && this.size + bytes > this.options.maxBytes) this.rotate();
    writeSync(this.fd, chunk);
    this.size += bytes;
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
