/** Agent runs in the profile's database: what ran where, with which model, how it ended and what it used. */
import type { RunResult, RunUsage } from '../../shared/protocol/results.ts';
import type { Store } from '../store/database.ts';
import type { Migration } from '../store/migrations.ts';

export const RUN_MIGRATIONS: readonly Migration[] = [{
  version: 1,
  name: 'agent runs',
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

  started(run: { id: string; agent: string; sessionKey: string; surface: string; at: number }): void {
    this.store.prepare("INSERT INTO agent_runs (id, agent, session_key, surface, status, started_at, daemon) VALUES (?, ?, ?, ?, 'running', ?, ?)")
      .run(run.id, run.agent, run.sessionKey, run.surface, run.at, this.daemon);
  }

  finished(result: RunResult, at = Date.now()): void {
    const usage: RunUsage = result.usage;
    this.store.prepare('UPDATE agent_runs SET status = ?, model = ?, finished_at = ?, input_tokens = ?, output_tokens = ?, steps = ?, error = ? WHERE id = ?')
      .run(result.status, result.model, at, usage.inputTokens ?? null, usage.outputTokens ?? null, result.steps, result.error ?? null, result.runId);
  }

  exists(id: string): boolean {
    return this.store.prepare('SELECT 1 FROM agent_runs WHERE id = ?').get(id) !== undefined;
  }

  /**
   * Runs a daemon that died left running: they were interrupted. Alone on its
   * store, a starting daemon knows every running run was a previous one's;
   * sharing one, only runs of daemons no longer attached are.
   */
  interruptLeftovers(): number {
    const update = "UPDATE agent_runs SET status = 'interrupted', finished_at = ?, error = 'the daemon stopped during the run' WHERE status = 'running'";
    const live = this.store.liveDaemons();
    if (!live) return Number(this.store.prepare(update).run(Date.now()).changes);
    // This daemon is among those attached, and its own runs have not started yet.
    return Number(this.store.engine.prepare(`${update} AND (daemon IS NULL OR daemon NOT IN (${live.map(() => '?').join(', ')}))`).run(Date.now(), ...live).changes);
  }

  prune(retentionMs: number): number {
    return Number(this.store.prepare("DELETE FROM agent_runs WHERE status <> 'running' AND started_at < ?").run(Date.now() - retentionMs).changes);
  }
}
