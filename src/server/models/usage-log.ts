/** Every model call, with the tokens its provider counted: what `gateway usage` sums up and budgets are checked against. */
import type { UsageGroup, UsageSummary } from '../../shared/protocol/results.ts';
import type { Migration } from '../store/migrations.ts';
import type { Store } from '../store/database.ts';
import { pruneRows } from '../store/retention.ts';

export const USAGE_MIGRATIONS: readonly Migration[] = [{
  version: 1,
  name: 'model calls',
  was: { module: 'models', version: 1 },
  sql: `
    CREATE TABLE model_calls (
      id INTEGER PRIMARY KEY,
      at BIGINT NOT NULL,
      provider TEXT NOT NULL,
      model TEXT NOT NULL,
      agent TEXT,
      session_key TEXT,
      subject TEXT,
      surface TEXT NOT NULL,
      input_tokens INTEGER,
      output_tokens INTEGER,
      latency_ms INTEGER NOT NULL,
      first_token_ms INTEGER,
      outcome TEXT NOT NULL,
      status INTEGER,
      error TEXT
    );
    CREATE INDEX model_calls_at ON model_calls (at);
    CREATE INDEX model_calls_subject ON model_calls (subject, at);
  `,
}];

export interface ModelCall {
  at: number;
  provider: string;
  model: string;
  agent?: string;
  sessionKey?: string;
  subject?: string;
  surface: string;
  inputTokens?: number;
  outputTokens?: number;
  latencyMs: number;
  firstTokenMs?: number;
  outcome: 'ok' | 'error' | 'aborted' | 'timeout';
  status?: number;
  error?: string;
}

type Row = Record<string, unknown>;

export class UsageLog {
  private readonly store: Store;
  /** Records on their way to the store: what reads them here waits for them, the call that made them does not. */
  private readonly writing = new Set<Promise<void>>();

  constructor(store: Store) {
    this.store = store;
  }

  /** Records a call in the background; a failure goes to `failed` (the call itself was answered already). */
  record(call: ModelCall, failed: (error: unknown) => void): void {
    const write = this.store.run(`INSERT INTO model_calls (at, provider, model, agent, session_key, subject, surface, input_tokens, output_tokens, latency_ms, first_token_ms, outcome, status, error)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    call.at, call.provider, call.model, call.agent ?? null, call.sessionKey ?? null, call.subject ?? null, call.surface,
    call.inputTokens ?? null, call.outputTokens ?? null, call.latencyMs, call.firstTokenMs ?? null, call.outcome, call.status ?? null, call.error ?? null)
      .then(() => undefined, failed)
      .finally(() => this.writing.delete(write));
    this.writing.add(write);
  }

  /** Waits for the records on their way. */
  private async settled(): Promise<void> {
    if (this.writing.size > 0) await Promise.all(this.writing);
  }

  /** Tokens a subject used since a time (for budgets): what the providers counted. */
  async tokensSince(subject: string, since: number): Promise<number> {
    await this.settled();
    const row = await this.store.get<Row>('SELECT COALESCE(SUM(COALESCE(input_tokens, 0) + COALESCE(output_tokens, 0)), 0) AS tokens FROM model_calls WHERE subject = ? AND at >= ?', subject, since);
    return Number(row?.tokens ?? 0);
  }

  async summary(since: number): Promise<UsageSummary> {
    await this.settled();
    const group = async (column: string | undefined): Promise<UsageGroup[]> => {
      const key = column ? `COALESCE(${column}, '-')` : "'all'";
      const rows = await this.store.all<Row>(`SELECT ${key} AS key, COUNT(*) AS calls, SUM(CASE WHEN outcome = 'ok' THEN 0 ELSE 1 END) AS errors,
        COALESCE(SUM(input_tokens), 0) AS input_tokens, COALESCE(SUM(output_tokens), 0) AS output_tokens,
        SUM(CASE WHEN outcome = 'ok' AND input_tokens IS NULL AND output_tokens IS NULL THEN 1 ELSE 0 END) AS uncounted, AVG(latency_ms) AS latency
        FROM model_calls WHERE at >= ?${column ? ` GROUP BY ${key} ORDER BY calls DESC, key` : ''}`, since);
      return rows.map((row) => ({
        key: String(row.key), calls: Number(row.calls), errors: Number(row.errors), inputTokens: Number(row.input_tokens),
        outputTokens: Number(row.output_tokens), uncounted: Number(row.uncounted), latencyMsAvg: Math.round(Number(row.latency ?? 0)),
      }));
    };
    const [[total], byAgent, byModel, bySubject, bySurface] = await Promise.all([
      group(undefined), group('agent'), group("provider || '/' || model"), group('subject'), group('surface'),
    ]);
    return {
      since: new Date(since).toISOString(),
      total: total ?? { key: 'all', calls: 0, errors: 0, inputTokens: 0, outputTokens: 0, uncounted: 0, latencyMsAvg: 0 },
      byAgent, byModel, bySubject, bySurface,
    };
  }

  async prune(retentionMs: number): Promise<number> {
    return pruneRows(this.store, 'model_calls', 'id', 'at < ?', Date.now() - retentionMs);
  }
}
