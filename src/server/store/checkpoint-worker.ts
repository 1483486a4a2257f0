// Runs in a worker thread: copies the WAL back into the database file with a
// connection of its own, so the daemon's thread never pays for checkpoints.
// Once nothing has been written for a while, it empties the WAL file and
// offers to stop (see Checkpointer).
import { DatabaseSync } from 'node:sqlite';
import { parentPort, workerData } from 'node:worker_threads';

const { path, synchronous, intervalMs, idleMs } = workerData as { path: string; synchronous: 'normal' | 'full'; intervalMs: number; idleMs: number };
const db = new DatabaseSync(path);
db.exec(`PRAGMA synchronous = ${synchronous === 'full' ? 'FULL' : 'NORMAL'}`);
// Never waits for a lock: a checkpoint that cannot have one now is made at the next turn.
db.exec('PRAGMA busy_timeout = 0');
// This connection never checkpoints on its own commits (it makes none).
db.exec('PRAGMA wal_autocheckpoint = 0');
const checkpoint = db.prepare('PRAGMA wal_checkpoint(PASSIVE)');
const truncate = db.prepare('PRAGMA wal_checkpoint(TRUNCATE)');
// Changes whenever another connection commits.
const dataVersion = db.prepare('PRAGMA data_version');

type Outcome = { busy: number; log: number; checkpointed: number };
let version = -1;
let changedAt = Date.now();
let offered = false;

const run = () => {
  try {
    const seen = Number((dataVersion.get() as { data_version: number }).data_version);
    if (seen !== version) {
      version = seen;
      changedAt = Date.now();
      offered = false;
    }
    const outcome = checkpoint.get() as Outcome;
    if (offered || Date.now() - changedAt < idleMs || outcome.busy !== 0 || outcome.log !== outcome.checkpointed) return;
    // Every frame is in the database and nothing was written for a while: the WAL file goes back to nothing (a
    // reader or a writer of the moment keeps it as it is, and the next turn tries again), and the thread may stop.
    if ((truncate.get() as Outcome).busy !== 0) return;
    offered = true;
    parentPort!.postMessage({ type: 'idle' });
  } catch (error) {
    parentPort!.postMessage({ type: 'error', message: (error as Error).message });
  }
};
const timer = setInterval(run, intervalMs);
parentPort!.on('message', (message: { type: string }) => {
  if (message.type !== 'stop') return;
  clearInterval(timer);
  run();
  db.close();
  parentPort!.close();
});
