// Runs in a worker thread of the daemon, on a SQLite store: records webhook
// deliveries with their jobs, and runs those jobs (github.*), with a connection
// of its own. While none of those jobs waits, a delivery's job makes its first
// attempt in the delivery's own commit: one commit, no claim. The daemon's
// thread then only reads, checks and answers deliveries; their writes and their
// jobs run beside it, on the other core.
import type { Logger } from 'pino';
import { parentPort, workerData } from 'node:worker_threads';
import { JobQueue, JobWorker, WEBHOOK_LANE } from '../jobs/module.ts';
import { TableBuilder } from '../kernel/registry.ts';
import { Store } from '../store/database.ts';
import { WriterTurns } from '../store/writer-turns.ts';
import { registerGithubHandlers } from './github-handlers.ts';
import { acceptDeliveries, type Outcome, type RunAtOnce } from './deliveries.ts';
import { type FromThread, type ThreadSettings, type ToThread } from './thread-protocol.ts';

const settings = workerData as ThreadSettings;
const port = parentPort!;
const post = (message: FromThread) => port.postMessage(message);

/** The daemon's log, through its thread: the fields of a line and its message. */
const forward = (level: 'info' | 'warn' | 'error') => (fields: unknown, message?: string) => {
  if (typeof fields === 'string') post({ type: 'log', level, fields: {}, message: fields });
  else post({ type: 'log', level, fields: errorsAsText(fields as Record<string, unknown>), message: message ?? '' });
};
/** An Error crosses to the daemon's thread as its message (a clone would lose its kind anyway). */
const errorsAsText = (fields: Record<string, unknown>) =>
  Object.fromEntries(Object.entries(fields).map(([key, value]) => [key, value instanceof Error ? value.message : value]));
const logger = { info: forward('info'), warn: forward('warn'), error: forward('error') } as unknown as Logger;

/** What the daemon's thread needs of a failed write to answer it as it would its own: the message and the codes. */
const describe = (error: unknown) => {
  const found = error as { message?: unknown; code?: unknown; errcode?: unknown } | null;
  return {
    message: String(found?.message ?? error),
    ...(typeof found?.code === 'string' ? { code: found.code } : {}),
    ...(typeof found?.errcode === 'number' ? { errcode: found.errcode } : {}),
  };
};

// A thread of the daemon may block: it waits for the write lock in SQLite's busy handler, and the daemon migrated already.
const store = await Store.open({ path: settings.path, synchronous: settings.synchronous, blocking: true, migrate: false });
store.setAutocheckpoint(settings.autocheckpoint);
// Before each transaction, a write the daemon's thread waits to make goes first.
store.shareWriteLock(new WriterTurns('thread', settings.turns));
const queue = new JobQueue(store, { owner: settings.owner, leaseMs: settings.leaseMs, lane: { under: WEBHOOK_LANE } });

// The built-in handlers of deliveries' jobs, in a table of their own, resolved as in the daemon's: a kind's own, else github.*.
const table = new TableBuilder({ reservedPaths: () => [], compileSchema: () => undefined });
registerGithubHandlers(table.api('webhooks', logger, true).jobs);

// Deliveries go before queued jobs: a group of jobs waits while deliveries do, and is small while they come, so a
// backlog never keeps a delivery waiting more than a few jobs' time.
const worker = new JobWorker({
  queue, store, logger, concurrency: settings.concurrency, handler: (kind) => table.table.jobHandler(kind)?.value, requeueAtStart: false,
  yieldTo: () => ({ waiting: waiting.length > 0, claim: Date.now() - lastAccepted < DELIVERIES_COME_MS ? GROUP_WHILE_DELIVERIES : settings.concurrency }),
});

// The daemon's live views hear that jobs changed; the daemon throttles what it sends on.
let changed = false;
queue.onChanged(() => {
  if (changed) return;
  changed = true;
  setImmediate(() => {
    changed = false;
    post({ type: 'changed' });
  });
});
// A storage failure met here (a full disk) is the daemon's to report, in readiness and status.
store.health.onChange((fault) => post({ type: 'health', fault: fault ? { kind: fault.kind, detail: fault.detail } : null }));

let waiting: Extract<ToThread, { type: 'accept' }>[] = [];
/** Deliveries count as coming for this long after the last; meanwhile the worker claims groups of this many jobs. */
const DELIVERIES_COME_MS = 100;
const GROUP_WHILE_DELIVERIES = 8;
// A thread without deliveries or due jobs for a while offers to stop (its heap and page cache go back to the system);
// the daemon takes it up once nothing it sent is unanswered, and starts another at the next delivery.
let lastAccepted = Date.now();
setInterval(() => {
  void queue.nextRunAt().then((next) => {
    if (Date.now() - lastAccepted >= settings.idleMs && waiting.length === 0 && worker.active === 0 && (next === undefined || next > Date.now())) post({ type: 'idle' });
  }, () => {
    // The store cannot be read now (its health says why): not idle, asked again at the next check.
  });
}, Math.min(5000, settings.idleMs)).unref();
async function acceptWaiting(): Promise<void> {
  try {
    await recordWaiting();
  } finally {
    // A worker that gave way to these deliveries takes its next group now.
    worker.resume();
  }
}
async function recordWaiting(): Promise<void> {
  lastAccepted = Date.now();
  const groups = waiting;
  waiting = [];
  let outcomes: Outcome[];
  try {
    // A delivery's job runs as it is recorded, in the same transaction: one commit and no claim per delivery. A job
    // that owes no order (a push) does so even behind a backlog, which then never makes a delivery dearer; the others
    // only while no job of the lane waits before them (jobs keep their order), and queue behind a backlog as usual.
    // Asked once, inside the group's transaction (where a read costs least).
    const runAtOnce: RunAtOnce = (jobs, tx) => worker.runAtOnce(jobs, tx, async () => worker.active === 0 && !(await queue.hasDue(tx)));
    outcomes = await acceptDeliveries(store, queue, groups.flatMap((group) => group.deliveries), runAtOnce);
  } catch (error) {
    for (const group of groups) post({ type: 'failed', id: group.id, error: describe(error) });
    // Said again at every failure: the daemon's own writes that work in between clear what it was told.
    const fault = store.health.fault;
    if (fault) post({ type: 'health', fault: { kind: fault.kind, detail: fault.detail } });
    return;
  }
  let offset = 0;
  for (const group of groups) {
    post({ type: 'accepted', id: group.id, outcomes: outcomes.slice(offset, offset + group.deliveries.length) });
    offset += group.deliveries.length;
  }
}

port.on('message', (message: ToThread) => {
  switch (message.type) {
    case 'accept':
      // Groups that arrive together share one transaction: every message waiting now is in it.
      if (waiting.push(message) === 1) setImmediate(() => void acceptWaiting());
      break;
    case 'autocheckpoint':
      store.setAutocheckpoint(message.pages);
      break;
    case 'stop':
      // Deliveries that came before the stop are recorded and answered first.
      void (async () => {
        if (waiting.length > 0) await recordWaiting();
        const unfinished = await worker.drain(message.timeoutMs);
        await store.close();
        post({ type: 'stopped', unfinished });
        port.close();
      })();
      break;
  }
});

await worker.start();
post({ type: 'ready' });
