/**
 * Retention's deletions, in bounded batches: each statement deletes at most
 * RETENTION_BATCH rows, so it holds SQLite's write lock (and, SQLite running
 * on the daemon's thread, everything else the daemon does) for milliseconds,
 * and the event loop takes a turn between two batches. Months of rows past
 * the retention then go without a pause anyone notices.
 */
import type { Db, Parameter } from './engine.ts';

/** Rows a retention statement deletes at most. */
export const RETENTION_BATCH = 1000;

/** Lets everything waiting on the event loop (timers, requests, I/O) run before the next batch. */
const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * Runs a deletion batch after batch until one deletes fewer rows than it
 * may (none left), the event loop taking a turn between two; returns how many
 * rows all of them deleted. `batch` deletes at most `limit` rows and says how
 * many it did.
 */
export async function inBatches(batch: (limit: number) => Promise<number>, size = RETENTION_BATCH): Promise<number> {
  let total = 0;
  for (;;) {
    const deleted = await batch(size);
    total += deleted;
    if (deleted < size) return total;
    await turn();
  }
}

/**
 * Deletes the rows of a table a condition picks (the rows past a retention),
 * in batches (see inBatches); returns how many. `key` is the table's primary
 * key, one column or several ("channel, code"); `where` takes `params`.
 */
export function pruneRows(db: Db, table: string, key: string, where: string, ...params: Parameter[]): Promise<number> {
  const keyed = key.includes(',') ? `(${key})` : key;
  const sql = `DELETE FROM ${table} WHERE ${keyed} IN (SELECT ${key} FROM ${table} WHERE ${where} LIMIT ?)`;
  return inBatches(async (limit) => (await db.run(sql, ...params, limit)).changes);
}
