/**
 * Gives memory back after a burst. Under load V8 grows its heap (the young
 * generation up to its semi-space limit, old space with the garbage of
 * thousands of requests) and keeps those pages committed once the load has
 * gone: the daemon's RSS stayed about 110 MB above ready a minute after 10 s of
 * deliveries, with 20 MB of it in use. An ordinary collection frees the
 * objects but keeps the pages; a memory-reducing one (V8's "last resort":
 * several full collections that shrink the young generation and release empty
 * pages) returns them to the system. It costs a pause of a few to a few tens of
 * milliseconds, so it runs only when the event loop has been idle for two
 * checks in a row after RSS grew well past what it was, or after a thread of
 * the daemon was let go (THREAD_RELEASED: the webhook thread, idle for 30 s;
 * or STARTED_LATE: a channel account connected, its library's loading and
 * first requests left a young generation grown by 20-25 MB, under the mark;
 * with an 8 MB young generation the daemon's own RSS may not grow past the
 * mark in a last round, and 60 s after the load RSS stood 60 MB above ready
 * instead of 34-38 MB): never under load;
 * and once, on the turn of the event loop after start-up (before the loop
 * first polls for connections), for what start-up itself left (about 4 MB,
 * for a pause of about 20 ms). A forced collection just after the first
 * requests leaves V8's code for them slower for the rest of the daemon's life
 * (measured: GET /healthz 0.74x a bare server instead of 0.95x), so should a
 * client still come first, start-up's garbage is left to the ordinary
 * collections. The collection after a burst cost the probes the same
 * (measured: 0.79x of their rate before it; 0.64-0.71x of a bare server in
 * one run of four) while start-up's raised tiering counts stayed in force;
 * with V8's own counts back once ready (tiering.ts) the probes ran at
 * 0.90-0.99x of a bare server after it in four runs. It is kept: it is what
 * brings RSS back within 50 MB of ready, where an ordinary major collection
 * leaves it 65 MB above.
 */
import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import { STARTED_LATE, THREAD_RELEASED } from '../kernel/threads.ts';

type Collect = (options: { type: 'major'; execution: 'sync'; flavor: 'last-resort' }) => void;

/** V8's gc() for this module alone: exposed to a fresh context, never to the daemon's or a plugin's globals. */
function loadCollector(): Collect | undefined {
  try {
    const v8 = process.getBuiltinModule('node:v8');
    const vm = process.getBuiltinModule('node:vm');
    v8.setFlagsFromString('--expose-gc');
    const collect = vm.runInNewContext('gc') as Collect | undefined;
    v8.setFlagsFromString('--no-expose-gc');
    return typeof collect === 'function' ? collect : undefined;
  } catch {
    return undefined;
  }
}

export interface MemoryReducerOptions {
  /** How often the event loop's use is looked at. */
  intervalMs?: number;
  /** Below this share of busy time the daemon counts as idle. */
  idleUtilization?: number;
  /** RSS growth over the last low mark that is worth giving back. */
  growthBytes?: number;
  /** Delay before start-up's garbage is given back; by default the next turn of the event loop. */
  settleMs?: number;
}

/** Published by node:net for each connection a server of the process accepts. */
const ACCEPTED = 'net.server.socket';

/** Starts watching; returns the function that stops it. */
export function startMemoryReducer(logger: Logger, options: MemoryReducerOptions = {}): () => void {
  const collect = loadCollector();
  if (!collect) return () => undefined;
  const intervalMs = options.intervalMs ?? 5000;
  const idleUtilization = options.idleUtilization ?? 0.02;
  const growthBytes = options.growthBytes ?? 32 * 1024 * 1024;
  let floor = process.memoryUsage.rss();
  let previous = performance.eventLoopUtilization();
  let idleChecks = 0;
  let released = false;
  const onReleased = () => { released = true; };
  // Start-up leaves garbage and a young generation grown by it (compiling, reading the configuration, migrations):
  // it goes back once, before the first client is accepted: timers run before the loop polls for connections.
  // Should one still come first, it is left (listened for only until then).
  const channels = process.getBuiltinModule('node:diagnostics_channel');
  let served = false;
  const onAccepted = () => { served = true; };
  channels.subscribe(ACCEPTED, onAccepted);
  channels.subscribe(THREAD_RELEASED, onReleased);
  channels.subscribe(STARTED_LATE, onReleased);
  const settle = setTimeout(() => {
    channels.unsubscribe(ACCEPTED, onAccepted);
    if (served) return;
    const before = process.memoryUsage.rss();
    const started = performance.now();
    collect({ type: 'major', execution: 'sync', flavor: 'last-resort' });
    floor = process.memoryUsage.rss();
    logger.debug({ rssBefore: before, rssAfter: floor, ms: Math.round(performance.now() - started) }, 'gave start-up memory back');
  }, options.settleMs ?? 0);
  settle.unref();
  const timer = setInterval(() => {
    const now = performance.eventLoopUtilization();
    const { utilization } = performance.eventLoopUtilization(now, previous);
    previous = now;
    idleChecks = utilization < idleUtilization ? idleChecks + 1 : 0;
    const rss = process.memoryUsage.rss();
    // The low mark follows RSS down (a quiet daemon's own collections) but never up.
    floor = Math.min(floor, rss);
    if (idleChecks < 2 || (rss < floor + growthBytes && !released)) return;
    released = false;
    const started = performance.now();
    collect({ type: 'major', execution: 'sync', flavor: 'last-resort' });
    const after = process.memoryUsage.rss();
    floor = after;
    idleChecks = 0;
    logger.debug({ rssBefore: rss, rssAfter: after, ms: Math.round(performance.now() - started) }, 'gave memory back after a busy spell');
  }, intervalMs);
  timer.unref();
  return () => {
    channels.unsubscribe(ACCEPTED, onAccepted);
    channels.unsubscribe(THREAD_RELEASED, onReleased);
    channels.unsubscribe(STARTED_LATE, onReleased);
    clearTimeout(settle);
    clearInterval(timer);
  };
}
