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
}];

export class RunStore {
  private readonly store: Store;

  constructor(store: Store) {
    this.store = store;
  }

  started(run: { id: string; agent: string; sessionKey: string; surface: string; at: number }): void {
    this.store.prepare("INSERT INTO agent_runs (id, agent, session_key, surface, status, started_at) VALUES (?, ?, ?, ?, 'running', ?)")
      .run(run.id, run.agent, run.sessionKey, run.surface, run.at);
  }

  finished(result: RunResult, at = Date.now()): void {
    const usage: RunUsage = result.usage;
    this.store.prepare('UPDATE agent_runs SET status = ?, model = ?, finished_at = ?, input_tokens = ?, output_tokens = ?, steps = ?, error = ? WHERE id = ?')
      .run(result.status, result.model, at, usage.inputTokens ?? null, usage.outputTokens ?? null, result.steps, result.error ?? null, result.runId);
  }

  exists(id: string): boolean {
    return this.store.prepare('SELECT 1 FROM agent_runs WHERE id = ?').get(id) !== undefined;
  }

  /** Runs a daemon that died left running: they were interrupted. */
  interruptLeftovers(): number {
    return Number(this.store.prepare("UPDATE agent_runs SET status = 'interrupted', finished_at = ?, error = 'the daemon stopped during the run' WHERE status = 'running'").run(Date.now()).changes);
  }

  prune(retentionMs: number): number {
    return Number(this.store.prepare("DELETE FROM agent_runs WHERE status <> 'running' AND started_at < ?").run(Date.now() - retentionMs).changes);
  }
}
