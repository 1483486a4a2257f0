import type { StorageFaultKind } from '../store/faults.ts';
import type { Outcome, RawDelivery } from './deliveries.ts';

/** What the webhook thread is started with. */
export interface ThreadSettings {
  path: string;
  synchronous: 'normal' | 'full';
  /** The daemon's instance id: the thread's claims are the daemon's. */
  owner: string;
  leaseMs: number;
  concurrency: number;
  /** WAL pages its connection lets accumulate before it checkpoints during a commit, as the daemon's own. */
  autocheckpoint: number;
  /** After this long without deliveries or due jobs, the thread offers to stop. */
  idleMs: number;
  /** The turns at the write lock it takes with the daemon's thread (WriterTurns). */
  turns: SharedArrayBuffer;
}

/** A failed write, as much as the daemon's thread needs to answer it as its own (storage faults by their codes). */
export interface ThreadError {
  message: string;
  code?: string;
  errcode?: number;
}

export type ToThread =
  | { type: 'accept'; id: number; deliveries: RawDelivery[] }
  | { type: 'autocheckpoint'; pages: number }
  | { type: 'stop'; timeoutMs: number };

export type FromThread =
  | { type: 'ready' }
  | { type: 'idle' }
  | { type: 'accepted'; id: number; outcomes: Outcome[] }
  | { type: 'failed'; id: number; error: ThreadError }
  | { type: 'changed' }
  | { type: 'health'; fault: { kind: StorageFaultKind; detail: string } | null }
  | { type: 'log'; level: 'info' | 'warn' | 'error'; fields: Record<string, unknown>; message: string }
  | { type: 'stopped'; unfinished: number };
