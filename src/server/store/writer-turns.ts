/** Slots of the shared buffer: how many writes the daemon's thread waits to make, and whether the other thread writes. */
const WANTED = 0;
const HELD = 1;

/** The longest the daemon's thread waits for the other thread's transaction before it asks SQLite anyway. */
const DAEMON_WAIT_MS = 5000;
/** The longest the other thread stands aside for the daemon's writes before it asks SQLite anyway. */
const THREAD_WAIT_MS = 250;

/**
 * Turns at SQLite's write lock between the daemon's thread and another thread
 * of the daemon writing the same file (the webhook thread).
 *
 * SQLite keeps no queue of writers: a connection that finds the lock taken
 * sleeps in its busy handler (1, 2, 5 ... 100 ms) and tries again, so against
 * a thread that commits all the time the daemon's thread can lose for a second
 * and more, and every request of the daemon waits with it. With turns, the
 * daemon's thread says it wants to write and waits for the other thread's
 * transaction (one, a few milliseconds) to end; the other thread stands aside
 * before its next transaction while the daemon's thread wants to write. Each
 * side waits on the other's word, not on a timer: the other thread in
 * Atomics.wait, the daemon's thread in Atomics.waitAsync, which never blocks
 * it. SQLite's busy handler (the other thread's) and timed retries (the
 * daemon's) stay the fallback, past the waits' bounds.
 */
export class WriterTurns {
  readonly buffer: SharedArrayBuffer;
  private readonly slots: Int32Array;
  private readonly daemon: boolean;

  /** side: 'daemon' for the daemon's thread, which goes first; 'thread' for the one that stands aside. */
  constructor(side: 'daemon' | 'thread', buffer = new SharedArrayBuffer(2 * Int32Array.BYTES_PER_ELEMENT)) {
    this.buffer = buffer;
    this.slots = new Int32Array(buffer);
    this.daemon = side === 'daemon';
  }

  /** Before a write transaction (or a write outside one) begins: the daemon's thread waits without blocking, the other thread blocks. */
  enter(): void | Promise<void> {
    if (this.daemon) return this.daemonEnters();
    const until = performance.now() + THREAD_WAIT_MS;
    for (;;) {
      Atomics.store(this.slots, HELD, 1);
      const wanted = Atomics.load(this.slots, WANTED);
      if (wanted === 0) return;
      // The daemon's thread wants the lock: let it go first, and wait for its word that it is done.
      Atomics.store(this.slots, HELD, 0);
      Atomics.notify(this.slots, HELD);
      const left = until - performance.now();
      if (left <= 0 || Atomics.wait(this.slots, WANTED, wanted, left) === 'timed-out') {
        Atomics.store(this.slots, HELD, 1);
        return;
      }
    }
  }

  /** The daemon's thread says it wants to write, then waits (without blocking) for the other thread's transaction to end. */
  private async daemonEnters(): Promise<void> {
    // Said first, then the other side's state read: of two writers starting at once, at least one sees the other.
    Atomics.add(this.slots, WANTED, 1);
    const until = performance.now() + DAEMON_WAIT_MS;
    while (Atomics.load(this.slots, HELD) === 1) {
      const left = until - performance.now();
      if (left <= 0) break;
      const waited = Atomics.waitAsync(this.slots, HELD, 1, left);
      if ((waited.async ? await waited.value : waited.value) === 'timed-out') break;
    }
  }

  /** Once the transaction (or the write) ended, committed or not. */
  leave(): void {
    if (this.daemon) {
      Atomics.sub(this.slots, WANTED, 1);
      Atomics.notify(this.slots, WANTED);
      return;
    }
    Atomics.store(this.slots, HELD, 0);
    Atomics.notify(this.slots, HELD);
  }
}
