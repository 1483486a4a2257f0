/**
 * The automations' records: each firing (keyed by automation and what fired
 * it, so a firing happens once whoever fires it) with what its run answered,
 * and each scheduled automation's cursor (the scheduled time up to which its
 * firings are made), from which missed firings are found after a stop.
 */
import type { Db, Store } from '../store/database.ts';
import type { Migration } from '../store/migrations.ts';
import { pruneRows } from '../store/retention.ts';

export const AUTOMATION_MIGRATIONS: readonly Migration[] = [{
  version: 1,
  name: 'automation firings and schedule cursors',
  sql: `
    CREATE TABLE automation_firings (
      automation TEXT NOT NULL,
      firing_key TEXT NOT NULL,
      scheduled_for BIGINT NOT NULL,
      job_id TEXT NOT NULL,
      created_at BIGINT NOT NULL,
      fired_at BIGINT,
      run_id TEXT,
      answer TEXT,
      usage TEXT,
      delivered_to TEXT,
      skipped TEXT,
      fired_by TEXT NOT NULL,
      PRIMARY KEY (automation, firing_key)
    );
    CREATE INDEX automation_firings_recent ON automation_firings (automation, created_at);
    CREATE INDEX automation_firings_created ON automation_firings (created_at);
    CREATE TABLE automation_cursors (
      automation TEXT PRIMARY KEY,
      spec TEXT NOT NULL,
      cursor_at BIGINT NOT NULL
    );
  `,
}];

export interface FiringRow {
  automation: string;
  firing_key: string;
  scheduled_for: number;
  job_id: string;
  created_at: number;
  fired_at: number | null;
  run_id: string | null;
  answer: string | null;
  usage: string | null;
  delivered_to: string | null;
  skipped: string | null;
  fired_by: string;
}

const INSERT_FIRING = `INSERT INTO automation_firings (automation, firing_key, scheduled_for, job_id, created_at, fired_by) VALUES (?, ?, ?, ?, ?, ?)
  ON CONFLICT (automation, firing_key) DO NOTHING`;

export class Firings {
  private readonly store: Store;

  constructor(store: Store) {
    this.store = store;
  }

  /** Claims a firing's key; true when this caller made it (and must queue its job in the same transaction). */
  async claim(db: Db, firing: { automation: string; key: string; scheduledFor: number; jobId: string; firedBy: string }): Promise<boolean> {
    return (await db.run(INSERT_FIRING, firing.automation, firing.key, firing.scheduledFor, firing.jobId, Date.now(), firing.firedBy)).changes === 1;
  }

  /** Where each scheduled automation's firings stand: its spec and the time up to which they were made. */
  async cursors(): Promise<Map<string, { spec: string; at: number }>> {
    const rows = await this.store.all<{ automation: string; spec: string; cursor_at: number }>('SELECT automation, spec, cursor_at FROM automation_cursors');
    return new Map(rows.map((row) => [row.automation, { spec: row.spec, at: Number(row.cursor_at) }]));
  }

  /** Starts an automation's cursor at a moment, unless it has one for this spec (a daemon sharing the store started it). */
  async begin(db: Db, automation: string, spec: string, at: number): Promise<void> {
    await db.run(`INSERT INTO automation_cursors (automation, spec, cursor_at) VALUES (?, ?, ?)
      ON CONFLICT (automation) DO UPDATE SET spec = excluded.spec, cursor_at = excluded.cursor_at WHERE automation_cursors.spec <> excluded.spec`, automation, spec, at);
  }

  /** Moves a cursor forward (never back) to a firing just made. */
  async advance(db: Db, automation: string, spec: string, at: number): Promise<void> {
    await db.run('UPDATE automation_cursors SET cursor_at = ? WHERE automation = ? AND spec = ? AND cursor_at < ?', at, automation, spec, at);
  }

  /** Forgets the cursors of automations no longer scheduled: enabled again, they start from then. */
  async forget(automations: readonly string[]): Promise<void> {
    if (automations.length) await this.store.run(`DELETE FROM automation_cursors WHERE automation IN (${automations.map(() => '?').join(', ')})`, ...automations);
  }

  async get(automation: string, key: string, db: Db = this.store): Promise<FiringRow | undefined> {
    return db.get<FiringRow>('SELECT * FROM automation_firings WHERE automation = ? AND firing_key = ?', automation, key);
  }

  /** When a firing's run first started (kept across retries). */
  async started(automation: string, key: string, at: number): Promise<void> {
    await this.store.run('UPDATE automation_firings SET fired_at = ? WHERE automation = ? AND firing_key = ? AND fired_at IS NULL', at, automation, key);
  }

  /** What a firing's run answered and where it went: written with the delivery, in its transaction. */
  async finished(db: Db, automation: string, key: string, outcome: { runId: string | null; text: string; usage: Record<string, number> | null; deliveredTo: string | null }): Promise<void> {
    await db.run('UPDATE automation_firings SET run_id = ?, answer = ?, usage = ?, delivered_to = ? WHERE automation = ? AND firing_key = ?',
      outcome.runId, outcome.text, outcome.usage ? JSON.stringify(outcome.usage) : null, outcome.deliveredTo, automation, key);
  }

  async skip(automation: string, key: string, why: string): Promise<void> {
    await this.store.run('UPDATE automation_firings SET skipped = ? WHERE automation = ? AND firing_key = ?', why, automation, key);
  }

  /** The latest firings of an automation, newest first. */
  recent(automation: string, limit: number): Promise<FiringRow[]> {
    return this.store.all<FiringRow>('SELECT * FROM automation_firings WHERE automation = ? ORDER BY created_at DESC, scheduled_for DESC LIMIT ?', automation, limit);
  }

  /** The latest firing of each of these automations. */
  async latest(automations: readonly string[]): Promise<Map<string, FiringRow>> {
    if (!automations.length) return new Map();
    const list = automations.map(() => '?').join(', ');
    const rows = await this.store.all<FiringRow>(`SELECT f.* FROM automation_firings f
      JOIN (SELECT automation, MAX(created_at) AS created_at FROM automation_firings WHERE automation IN (${list}) GROUP BY automation) l
        ON l.automation = f.automation AND l.created_at = f.created_at`, ...automations);
    const latest = new Map<string, FiringRow>();
    for (const row of rows) {
      const seen = latest.get(row.automation);
      if (!seen || Number(row.scheduled_for) > Number(seen.scheduled_for)) latest.set(row.automation, row);
    }
    return latest;
  }

  /** Deletes firings older than the retention; says how many. */
  async prune(retentionMs: number): Promise<number> {
    return pruneRows(this.store, 'automation_firings', 'automation, firing_key', 'created_at < ?', Date.now() - retentionMs);
  }
}
