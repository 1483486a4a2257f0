/**
 * Published (node:diagnostics_channel) by a part of the daemon that let one of
 * its threads go: that thread's memory went back with it, and what the
 * daemon's own heap holds from the same busy spell goes at the memory
 * reducer's next idle checks (core/memory-reducer.ts), however little RSS grew
 * since its last collection.
 */
export const THREAD_RELEASED = 'gateway.thread.released';

/**
 * Published by a part of the daemon that has just done start-up work of its
 * own after the daemon was ready (a channel account connected for the first
 * time: its client library loaded, its first requests made). What that work
 * left goes at the memory reducer's next idle checks, as after a thread.
 */
export const STARTED_LATE = 'gateway.started.late';
