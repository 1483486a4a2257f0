/**
 * Failures of the storage under the daemon: a full disk, an I/O error, a
 * read-only file system. Each makes the request that met it answer
 * "unavailable" (503, nothing of it kept), and the store keeps the last one so
 * readiness and `gateway status` say why until writes work again.
 */
import { statfsSync } from 'node:fs';

export type StorageFaultKind = 'disk_full' | 'io_error' | 'read_only' | 'unreachable';

export interface StorageFault {
  kind: StorageFaultKind;
  /** The error as it came (no secret: SQLite, PostgreSQL and the file system speak of files, space and connections). */
  detail: string;
  since: number;
}

const SQLITE_READONLY = 8;
const SQLITE_IOERR = 10;
const SQLITE_FULL = 13;

/** Which storage failure an error is (SQLite's, PostgreSQL's or the file system's), if it is one. */
export function storageFaultKind(error: unknown): StorageFaultKind | undefined {
  const found = error as { code?: unknown; errcode?: unknown; message?: unknown; unreachable?: unknown } | null;
  if (!found || typeof found !== 'object') return undefined;
  if (found.unreachable === true) return 'unreachable';
  // PostgreSQL out of disk space (SQLSTATE 53100) or refusing writes (a standby, 25006).
  if (found.code === '53100') return 'disk_full';
  if (found.code === '25006') return 'read_only';
  const primary = typeof found.errcode === 'number' ? found.errcode & 0xff : undefined;
  if (found.code === 'ENOSPC' || found.code === 'EDQUOT' || primary === SQLITE_FULL) return 'disk_full';
  if (found.code === 'EROFS' || primary === SQLITE_READONLY) return 'read_only';
  if (found.code === 'EIO' || primary === SQLITE_IOERR) return 'io_error';
  return undefined;
}

export const describeFault = (kind: StorageFaultKind): string => ({
  disk_full: 'the disk that holds its state is full',
  io_error: 'the disk that holds its state fails to read or write',
  read_only: 'the file system that holds its state is read-only',
  unreachable: 'the database that holds its state cannot be reached',
})[kind];

/** Bytes free for this process on the file system of a path; undefined when it cannot be asked. */
export function freeBytes(path: string): number | undefined {
  try {
    const stats = statfsSync(path);
    return stats.bavail * stats.bsize;
  } catch {
    return undefined;
  }
}

/** Below this, the daemon counts its disk as full: a commit needs room for its pages and the WAL's. */
export const LOW_SPACE_BYTES = 1024 * 1024;

/** The last storage failure, cleared by the next write that works. */
export class StorageHealth {
  fault?: StorageFault;
  private readonly listeners = new Set<(fault: StorageFault | undefined) => void>();

  /** Notes a failed write; returns whether it was a storage failure. */
  failed(error: unknown): boolean {
    const kind = storageFaultKind(error);
    if (!kind) return false;
    this.adopt({ kind, detail: String((error as Error).message ?? error).slice(0, 200) });
    return true;
  }

  /** Takes on a failure, met here or by another connection of the daemon (a thread's). */
  adopt(fault: { kind: StorageFaultKind; detail: string }): void {
    if (this.fault?.kind === fault.kind) return;
    this.fault = { ...fault, since: Date.now() };
    for (const listener of this.listeners) listener(this.fault);
  }

  succeeded(): void {
    if (!this.fault) return;
    this.fault = undefined;
    for (const listener of this.listeners) listener(undefined);
  }

  onChange(listener: (fault: StorageFault | undefined) => void): void {
    this.listeners.add(listener);
  }

  /**
   * What keeps the daemon from storing, for readiness: a full disk (asked of
   * the file system, so it clears by itself when space returns), else the last
   * failed write while no write has worked since.
   */
  problem(dir: string): string | undefined {
    if (this.fault?.kind === 'unreachable') return `${describeFault('unreachable')} (${this.fault.detail}) since ${new Date(this.fault.since).toISOString()}; it reconnects by itself`;
    const free = freeBytes(dir);
    if (free !== undefined && free < LOW_SPACE_BYTES) return `${describeFault('disk_full')} (${dir}: ${Math.floor(free / 1024)} KiB free); free some space and it recovers by itself`;
    if (this.fault && !(this.fault.kind === 'disk_full' && free !== undefined)) {
      return `${describeFault(this.fault.kind)} (${this.fault.detail}) since ${new Date(this.fault.since).toISOString()}`;
    }
    return undefined;
  }
}
