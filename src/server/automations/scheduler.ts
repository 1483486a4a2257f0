/**
 * The clock of the scheduled automations: one timer for the soonest firing
 * of all of them (a heap orders them, so ten thousand cost what one does
 * between firings), and the firings that come due handed over together.
 */
import type { Logger } from 'pino';
import type { Schedule } from '../../shared/automations.ts';

/** A firing that came due. */
export interface Due {
  automation: string;
  spec: string;
  scheduledFor: number;
}

/** The longest one timer waits: the clock is looked at again at least this often (a suspended host, a changed clock). */
const MAX_WAIT_MS = 60_000;
/** How soon firings that could not be made (the store failed) are tried again. */
const RETRY_MS = 2000;
/** Most firings of one automation made up for in one tick when the daemon fell behind (a stall); the rest are skipped. */
const MAX_BEHIND = 10;

interface Entry {
  spec: string;
  schedule: Schedule;
  next: number;
  version: number;
}

type HeapItem = [at: number, id: string, version: number];

export class Scheduler {
  private readonly entries = new Map<string, Entry>();
  private heap: HeapItem[] = [];
  private timer?: NodeJS.Timeout;
  private version = 0;
  private stopped = true;
  private ticking = false;
  /** Firings handed over that failed to be made; tried again first. */
  private retry: Due[] = [];
  private readonly fire: (due: Due[]) => Promise<void>;
  private readonly log: Logger;
  private readonly now: () => number;

  constructor(options: { fire: (due: Due[]) => Promise<void>; log: Logger; now?: () => number }) {
    this.fire = options.fire;
    this.log = options.log;
    this.now = options.now ?? Date.now;
  }

  start(): void {
    this.stopped = false;
    this.arm();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  /** The spec an automation is scheduled under, if it is. */
  specOf(id: string): string | undefined {
    return this.entries.get(id)?.spec;
  }

  /** When an automation fires next, if it is scheduled and has a firing to come. */
  nextOf(id: string): number | undefined {
    const entry = this.entries.get(id);
    return entry && Number.isFinite(entry.next) ? entry.next : undefined;
  }

  ids(): string[] {
    return [...this.entries.keys()];
  }

  /** Schedules an automation's firings after a moment (replacing what it had). */
  set(id: string, spec: string, schedule: Schedule, after: number): void {
    const next = schedule.next(after) ?? Number.POSITIVE_INFINITY;
    const entry: Entry = { spec, schedule, next, version: ++this.version };
    this.entries.set(id, entry);
    if (Number.isFinite(next)) this.push([next, id, entry.version]);
    this.compact();
    this.arm();
  }

  remove(id: string): void {
    this.entries.delete(id);
    this.compact();
  }

  private arm(): void {
    clearTimeout(this.timer);
    if (this.stopped) return;
    this.dropStale();
    const top = this.heap[0];
    const wait = this.retry.length ? RETRY_MS : top ? Math.min(MAX_WAIT_MS, Math.max(0, top[0] - this.now())) : MAX_WAIT_MS;
    this.timer = setTimeout(() => void this.tick(), wait);
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    if (this.ticking || this.stopped) return;
    this.ticking = true;
    try {
      const now = this.now();
      const due = this.retry.splice(0);
      const behind = new Map<string, number>();
      this.dropStale();
      while (this.heap.length && this.heap[0]![0] <= now) {
        const [at, id] = this.pop()!;
        const entry = this.entries.get(id)!;
        const count = (behind.get(id) ?? 0) + 1;
        behind.set(id, count);
        if (count <= MAX_BEHIND) due.push({ automation: id, spec: entry.spec, scheduledFor: at });
        // Fallen far behind (the host slept): the firings between are skipped, the next one is in the future.
        const next = entry.schedule.next(count < MAX_BEHIND ? at : Math.max(at, now)) ?? Number.POSITIVE_INFINITY;
        entry.next = next;
        entry.version = ++this.version;
        if (Number.isFinite(next)) this.push([next, id, entry.version]);
        this.dropStale();
      }
      if (due.length) {
        try {
          await this.fire(due);
        } catch (error) {
          this.log.warn({ err: error, firings: due.length }, 'automation firings could not be made; trying again');
          this.retry.push(...due);
        }
      }
    } finally {
      this.ticking = false;
      this.arm();
    }
  }

  private dropStale(): void {
    while (this.heap.length) {
      const [, id, version] = this.heap[0]!;
      if (this.entries.get(id)?.version === version) return;
      this.pop();
    }
  }

  /** Rebuilds the heap when stale items outnumber live ones (many changes). */
  private compact(): void {
    if (this.heap.length <= 2 * this.entries.size + 1024) return;
    this.heap = [];
    for (const [id, entry] of this.entries) if (Number.isFinite(entry.next)) this.push([entry.next, id, entry.version]);
  }

  private push(item: HeapItem): void {
    const heap = this.heap;
    heap.push(item);
    let index = heap.length - 1;
    while (index > 0) {
      const parent = (index - 1) >> 1;
      if (heap[parent]![0] <= item[0]) break;
      heap[index] = heap[parent]!;
      index = parent;
    }
    heap[index] = item;
  }

  private pop(): HeapItem | undefined {
    const heap = this.heap;
    const top = heap[0];
    const last = heap.pop();
    if (!heap.length || !last) return top;
    let index = 0;
    for (;;) {
      const left = 2 * index + 1;
      if (left >= heap.length) break;
      const right = left + 1;
      const child = right < heap.length && heap[right]![0] < heap[left]![0] ? right : left;
      if (heap[child]![0] >= last[0]) break;
      heap[index] = heap[child]!;
      index = child;
    }
    heap[index] = last;
    return top;
  }
}
