// Runs in a worker thread: copies the WAL back into the database file with a
// connection of its own, so the daemon's thread never pays for checkpoints.
import { DatabaseSync } from 'node:sqlite';
import { parentPort, workerData } from 'node:worker_threads';

const { path, synchronous, intervalMs } = workerData as { path: string; synchronous: 'normal' | 'full'; intervalMs: number };
const db = new DatabaseSync(path);
db.exec(`PRAGMA synchronous = ${synchronous === 'full' ? 'FULL' : 'NORMAL'}`);
db.exec('PRAGMA busy_timeout = 1000');
// This connection never checkpoints on its own commits (it makes none).
db.exec('PRAGMA wal_autocheckpoint = 0');
const checkpoint = db.prepare('PRAGMA wal_checkpoint(PASSIVE)');

const run = () => {
  try {
    checkpoint.get();
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
