/** Every model call, with the tokens its provider counted: what `gateway usage` sums up and budgets are checked against. */
import type { UsageGroup, UsageSummary } from '../../shared/protocol/results.ts';
import type { Migration } from '../store/migrations.ts';
import type { Store } from '../store/database.ts';

export const USAGE_MIGRATIONS: readonly Migration[] = [{
  version: 1,
  name: 'model calls',
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

  constructor(store: Store) {
    this.store = store;
  }

  record(call: ModelCall): void {
    this.store.prepare(`INSERT INTO model_calls (at, provider, model, agent, session_key, subject, surface, input_tokens, output_tokens, latency_ms, first_token_ms, outcome, status, error)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`).run(
      call.at, call.provider, call.model, call.agent ?? null, call.sessionKey ?? null, call.subject ?? null, call.surface,
      call.inputTokens ?? null, call.outputTokens ?? null, call.latencyMs, call.firstTokenMs ?? null, call.outcome, call.status ?? null, call.error ?? null,
    );
  }

  /** Tokens a subject used since a time (for budgets): what the providers counted. */
  tokensSince(subject: string, since: number): number {
    const row = this.store.prepare('SELECT COALESCE(SUM(COALESCE(input_tokens, 0) + COALESCE(output_tokens, 0)), 0) AS tokens FROM model_calls WHERE subject = ? AND at >= ?').get(subject, since) as Row;
    return Number(row.tokens);
  }

  summary(since: number): UsageSummary {
    const group = (column: string | undefined): UsageGroup[] => {
      const key = column ? `COALESCE(${column}, '-')` : "'all'";
      const rows = this.store.prepare(`SELECT ${key} AS key, COUNT(*) AS calls, SUM(CASE WHEN outcome = 'ok' THEN 0 ELSE 1 END) AS errors,
        COALESCE(SUM(input_tokens), 0) AS input_tokens, COALESCE(SUM(output_tokens), 0) AS output_tokens,
        SUM(CASE WHEN outcome = 'ok' AND input_tokens IS NULL AND output_tokens IS NULL THEN 1 ELSE 0 END) AS uncounted, AVG(latency_ms) AS latency
        FROM model_calls WHERE at >= ?${column ? ` GROUP BY ${key} ORDER BY calls DESC, key` : ''}`).all(since) as Row[];
      return rows.map((row) => ({
        key: String(row.key), calls: Number(row.calls), errors: Number(row.errors), inputTokens: Number(row.input_tokens),
        outputTokens: Number(row.output_tokens), uncounted: Number(row.uncounted), latencyMsAvg: Math.round(Number(row.latency ?? 0)),
      }));
    };
    const [total] = group(undefined);
    return {
      since: new Date(since).toISOString(),
      total: total ?? { key: 'all', calls: 0, errors: 0, inputTokens: 0, outputTokens: 0, uncounted: 0, latencyMsAvg: 0 },
      byAgent: group('agent'),
      byModel: group("provider || '/' || model"),
      bySubject: group('subject'),
      bySurface: group('surface'),
    };
  }

  prune(retentionMs: number): number {
    return Number(this.store.prepare('DELETE FROM model_calls WHERE at < ?').run(Date.now() - retentionMs).changes);
  }
}
