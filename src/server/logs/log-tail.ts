/**
 * The daemon's log for the clients that ask: the last lines (from the log
 * file, or from memory when the daemon writes none) and a live tail pushed
 * in batches to each follower at the level it chose. Nothing is tapped while
 * nobody follows, unless the daemon writes no log file: then the last lines
 * are kept in memory.
 */
import { lastLines } from '../../shared/last-lines.ts';
import { LOG_LEVEL_VALUES } from '../../shared/log-line.ts';
import type { LogEntry } from '../../shared/protocol/results.ts';

/** Bounds of the live tail: lines kept without a file, the batch interval, the most lines in one batch. */
export const LOG_LIMITS = { memoryLines: 500, batchMs: 200, maxBatch: 500, scanLines: 20_000 } as const;

export type Push = (event: string, payload: unknown) => void;

/** A line as an entry: its JSON, or a line that is not JSON as an info message. */
export function parseLine(line: string): LogEntry | undefined {
  try {
    const entry = JSON.parse(line) as LogEntry;
    return entry && typeof entry === 'object' ? entry : undefined;
  } catch {
    return line.trim() ? { level: 30, time: '', msg: line } : undefined;
  }
}

export interface LogTailDeps {
  /** The log file the daemon writes, or undefined when it logs to stdout only. */
  logFile: () => string | undefined;
  /** Receives each line as it is written; returns a function that stops it. */
  onLog: (listener: (line: string) => void) => () => void;
  /** The last lines of a file. */
  readLast?: (path: string, count: number) => string[];
  limits?: Partial<LogLimits>;
}

type LogLimits = { readonly [K in keyof typeof LOG_LIMITS]: number };

export class LogTail {
  private readonly deps: LogTailDeps;
  private readonly limits: LogLimits;
  /** How to reach each admitted connection. */
  private readonly pushers = new Map<string, Push>();
  private readonly followers = new Map<string, { push: Push; level: number }>();
  private readonly memory: string[] = [];
  private untap: (() => void) | undefined;
  private batch: LogEntry[] = [];
  private skipped = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(deps: LogTailDeps) {
    this.deps = deps;
    this.limits = { ...LOG_LIMITS, ...deps.limits };
    this.tapped();
  }

  /** A client was admitted: how to push to it. */
  admitted(connectionId: string, push: Push): void {
    this.pushers.set(connectionId, push);
  }

  /** A client left: it follows no more. */
  closed(connectionId: string): void {
    this.pushers.delete(connectionId);
    if (this.followers.delete(connectionId)) this.tapped();
  }

  /** The last lines, at a level or above, holding a text. */
  tail({ lines = 200, level, text }: { lines?: number; level?: string; text?: string }): { entries: LogEntry[]; source: 'file' | 'memory' } {
    const floor = level ? LOG_LEVEL_VALUES[level]! : 0;
    const needle = text?.toLowerCase();
    const file = this.deps.logFile();
    const source = file ? (this.deps.readLast ?? lastLines)(file, floor > 0 || needle ? this.limits.scanLines : lines) : [...this.memory];
    const entries = source.flatMap((line) => {
      const entry = parseLine(line);
      if (!entry || entry.level < floor) return [];
      if (needle && !line.toLowerCase().includes(needle)) return [];
      return [entry];
    });
    return { entries: entries.slice(-lines), source: file ? 'file' : 'memory' };
  }

  /** A client follows the log from now, at a level or above (log.entries pushed to it). */
  follow(connectionId: string, level: string | undefined): void {
    const push = this.pushers.get(connectionId);
    if (push) this.followers.set(connectionId, { push, level: level ? LOG_LEVEL_VALUES[level]! : 0 });
    this.tapped();
  }

  unfollow(connectionId: string): void {
    this.followers.delete(connectionId);
    this.tapped();
  }

  stop(): void {
    clearTimeout(this.timer);
    this.untap?.();
  }

  /** Taps the log while someone follows, or always without a file; lets go of it otherwise. */
  private tapped(): void {
    const needed = this.followers.size > 0 || !this.deps.logFile();
    if (needed && !this.untap) this.untap = this.deps.onLog((line) => this.onLine(line));
    if (!needed && this.untap) {
      this.untap();
      this.untap = undefined;
    }
  }

  private onLine(line: string): void {
    if (!this.deps.logFile()) {
      this.memory.push(line);
      if (this.memory.length > this.limits.memoryLines) this.memory.shift();
    }
    if (this.followers.size === 0) return;
    if (this.batch.length >= this.limits.maxBatch) {
      this.skipped++;
    } else {
      const entry = parseLine(line.trimEnd());
      if (entry) this.batch.push(entry);
    }
    this.timer ??= setTimeout(() => this.flush(), this.limits.batchMs);
  }

  private flush(): void {
    this.timer = undefined;
    const entries = this.batch;
    this.batch = [];
    if (this.skipped > 0) entries.push({ level: 40, time: new Date().toISOString(), msg: `${this.skipped} log lines were skipped: they came faster than the live tail sends` });
    this.skipped = 0;
    for (const follower of this.followers.values()) {
      const seen = entries.filter((entry) => entry.level >= follower.level);
      if (seen.length > 0) follower.push('log.entries', { entries: seen });
    }
  }
}
