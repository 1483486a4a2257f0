/**
 * The daemon's log over the WebSocket: the last lines (logs.tail) and a live
 * tail (logs.follow) pushed as log.entries to the clients that asked, in
 * batches. Nothing is tapped while nobody follows, unless the daemon writes
 * no log file: then the last lines are kept in memory for logs.tail.
 */
import { lastLines } from '../../shared/last-lines.ts';
import { LOG_LEVEL_VALUES } from '../../shared/log-line.ts';
import type { LogEntry } from '../../shared/protocol/results.ts';
import { defineModule, type RpcClient } from '../kernel/module.ts';

/** Bounds of the live tail: lines kept without a file, the batch interval, the most lines in one batch. */
export const LOG_LIMITS = { memoryLines: 500, batchMs: 200, maxBatch: 500, scanLines: 20_000 } as const;

function parse(line: string): LogEntry | undefined {
  try {
    const entry = JSON.parse(line) as LogEntry;
    return entry && typeof entry === 'object' ? entry : undefined;
  } catch {
    return line.trim() ? { level: 30, time: '', msg: line } : undefined;
  }
}

interface Follower { push: (event: string, payload: unknown) => void; level: number }

export default defineModule({
  id: 'logs',
  setup(ctx) {
    const pushers = new Map<string, (event: string, payload: unknown) => void>();
    const followers = new Map<string, Follower>();
    const memory: string[] = [];
    let untap: (() => void) | undefined;
    let batch: LogEntry[] = [];
    let skipped = 0;
    let timer: NodeJS.Timeout | undefined;

    const flush = () => {
      timer = undefined;
      const entries = batch;
      batch = [];
      if (skipped > 0) entries.push({ level: 40, time: new Date().toISOString(), msg: `${skipped} log lines were skipped: they came faster than the live tail sends` });
      skipped = 0;
      for (const follower of followers.values()) {
        const seen = entries.filter((entry) => entry.level >= follower.level);
        if (seen.length > 0) follower.push('log.entries', { entries: seen });
      }
    };
    const onLine = (line: string) => {
      if (!ctx.daemon.logFile) {
        memory.push(line);
        if (memory.length > LOG_LIMITS.memoryLines) memory.shift();
      }
      if (followers.size === 0) return;
      if (batch.length >= LOG_LIMITS.maxBatch) {
        skipped++;
      } else {
        const entry = parse(line.trimEnd());
        if (entry) batch.push(entry);
      }
      timer ??= setTimeout(flush, LOG_LIMITS.batchMs);
    };
    const tapped = () => {
      const needed = followers.size > 0 || !ctx.daemon.logFile;
      if (needed && !untap) untap = ctx.daemon.onLog(onLine);
      if (!needed && untap) {
        untap();
        untap = undefined;
      }
    };
    tapped();

    ctx.connections.onAdmitted((client, _params, push) => pushers.set(client.connectionId, push));
    ctx.connections.onClosed((client: RpcClient) => {
      pushers.delete(client.connectionId);
      if (followers.delete(client.connectionId)) tapped();
    });
    ctx.onStop(() => {
      clearTimeout(timer);
      untap?.();
    });

    ctx.rpc.method({
      name: 'logs.tail',
      handler: ({ lines = 200, level, text }) => {
        const floor = level ? LOG_LEVEL_VALUES[level]! : 0;
        const needle = text?.toLowerCase();
        const file = ctx.daemon.logFile;
        const source = file ? lastLines(file, floor > 0 || needle ? LOG_LIMITS.scanLines : lines) : [...memory];
        const entries = source.flatMap((line) => {
          const entry = parse(line);
          if (!entry || entry.level < floor) return [];
          if (needle && !line.toLowerCase().includes(needle)) return [];
          return [entry];
        });
        return { entries: entries.slice(-lines), source: file ? 'file' as const : 'memory' as const };
      },
    });
    ctx.rpc.method({
      name: 'logs.follow',
      handler: ({ level }, client) => {
        const push = pushers.get(client.connectionId);
        if (push) followers.set(client.connectionId, { push, level: level ? LOG_LEVEL_VALUES[level]! : 0 });
        tapped();
        return { following: true as const };
      },
    });
    ctx.rpc.method({
      name: 'logs.unfollow',
      handler: (_params, client) => {
        followers.delete(client.connectionId);
        tapped();
        return { following: false as const };
      },
    });
  },
});
