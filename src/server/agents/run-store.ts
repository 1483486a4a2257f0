/** Agent runs in the profile's database: what ran where, with which model, how it ended and what it used. */
import type { RunResult, RunUsage } from '../../shared/protocol/results.ts';
import type { Db, Store } from '../store/database.ts';
import type { Migration } from '../store/migrations.ts';
import { pruneRows } from '../store/retention.ts';

export const RUN_MIGRATIONS: readonly Migration[] = [{
  version: 1,
  name: 'agent runs',
  was: { module: 'agents', version: 1 },
  sql: `
    CREATE TABLE agent_runs (
      id TEXT PRIMARY KEY,
      agent TEXT NOT NULL,
      session_key TEXT NOT NULL,
      surface TEXT NOT NULL,
      status TEXT NOT NULL,
      model TEXT,
      started_at BIGINT NOT NULL,
      finished_at BIGINT,
      input_tokens INTEGER,
      output_tokens INTEGER,
      steps INTEGER NOT NULL DEFAULT 0,
      error TEXT
    );
    CREATE INDEX agent_runs_session ON agent_runs (session_key, started_at);
    CREATE INDEX agent_runs_running ON agent_runs (status) WHERE status = 'running';
  `,
}, {
  version: 2,
  name: 'the daemon that runs each run',
  was: { module: 'agents', version: 2 },
  sql: 'ALTER TABLE agent_runs ADD COLUMN daemon TEXT',
}];

export class RunStore {
  private readonly store: Store;
  /** This daemon's instance id, recorded with each run it starts. */
  private readonly daemon: string;

  constructor(store: Store, daemon = 'local') {
    this.store = store;
    this.daemon = daemon;
  }

  async started(run: { id: string; agent: string; sessionKey: string; surface: string; at: number }, db: Db = this.store): Promise<void> {
    await db.run("INSERT INTO agent_runs (id, agent, session_key, surface, status, started_at, daemon) VALUES (?, ?, ?, ?, 'running', ?, ?)",
      run.id, run.agent, run.sessionKey, run.surface, run.at, this.daemon);
  }

  async finished(result: RunResult, at = Date.now()): Promise<void> {
    const usage: RunUsage = result.usage;
    await this.store.run('UPDATE agent_runs SET status = ?, model = ?, finished_at = ?, input_tokens = ?, output_tokens = ?, steps = ?, error = ? WHERE id = ?',
      result.status, result.model, at, usage.inputTokens ?? null, usage.outputTokens ?? null, result.steps, result.error ?? null, result.runId);
  }

  async exists(id: string): Promise<boolean> {
    return (await this.store.get('SELECT 1 AS found FROM agent_runs WHERE id = ?', id)) !== undefined;
  }

  /**
   * Runs a daemon that died left running: they were interrupted. Alone on its
   * store, a starting daemon knows every running run was a previous one's;
   * sharing one, only runs of daemons no longer attached are.
   */
  async interruptLeftovers(): Promise<number> {
    const update = "UPDATE agent_runs SET status = 'interrupted', finished_at = ?, error = 'the daemon stopped during the run' WHERE status = 'running'";
    const live = await this.store.liveDaemons();
    if (!live) return (await this.store.run(update, Date.now())).changes;
    // This daemon is among those attached, and its own runs have not started yet.
    return (await this.store.run(`${update} AND (daemon IS NULL OR daemon NOT IN (${live.map(() => '?').join(', ')}))`, Date.now(), ...live)).changes;
  }

  async prune(retentionMs: number): Promise<number> {
    return pruneRows(this.store, 'agent_runs', 'id', "status <> 'running' AND started_at < ?", Date.now() - retentionMs);
  }
}
