/** Every model call, with the tokens its provider counted: what `gateway usage` sums up and budgets are checked against. */
import type { UsageGroup, UsageSummary } from '../../shared/protocol/results.ts';
import type { Migration } from '../store/migrations.ts';
import type { Store } from '../store/database.ts';
import { pruneRows } from '../store/retention.ts';
import { MICROS } from './prices.ts';

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
}, {
  version: 2,
  name: 'what each model call cost, and for whom',
  sql: `
    ALTER TABLE model_calls ADD COLUMN cost_micros BIGINT;
    ALTER TABLE model_calls ADD COLUMN currency TEXT;
    ALTER TABLE model_calls ADD COLUMN cached_input_tokens INTEGER;
    ALTER TABLE model_calls ADD COLUMN automation TEXT;
    ALTER TABLE model_calls ADD COLUMN channel TEXT;
    ALTER TABLE model_calls ADD COLUMN person TEXT;
    CREATE INDEX model_calls_agent ON model_calls (agent, at);
    CREATE INDEX model_calls_automation ON model_calls (automation, at);
  `,
}, {
  version: 4,
  name: 'the agent that delegated each call\'s run',
  sql: `
    ALTER TABLE model_calls ADD COLUMN delegated_by TEXT;
    CREATE INDEX model_calls_delegated_by ON model_calls (delegated_by, at) WHERE delegated_by IS NOT NULL;
  `,
}, {
  version: 5,
  name: 'every agent above each call\'s run in its delegation chain',
  sql: 'ALTER TABLE model_calls ADD COLUMN delegators TEXT;',
}];

/** A chain of agents as a column keeps it: /first/.../last/, so one agent's part in it is found with LIKE. */
const chainColumn = (agents: readonly string[] | undefined) => (agents?.length ? `/${agents.join('/')}/` : null);
/** What finds an agent in that column (agent ids hold no / or %; their _ is escaped). */
const inChain = (agent: string) => `%/${agent.replaceAll('!', '!!').replaceAll('_', '!_')}/%`;

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
  cachedInputTokens?: number;
  /** What the call cost, in millionths of the currency (undefined: unknown). */
  costMicros?: number;
  currency?: string;
  /** The automation whose run made the call. */
  automation?: string;
  /** The channel of the conversation, and the person it is with (kernel/person.ts). */
  channel?: string;
  person?: string;
  /** The agent that delegated the run this call is a step of (agents.delegate). */
  delegatedBy?: string;
  /** Every agent above that run, first the one whose run started the chain. */
  delegators?: string[];
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
  record(entry: ModelCall | Promise<ModelCall>, failed: (error: unknown) => void): void {
    const write = Promise.resolve(entry).then((call) => this.store.run(`INSERT INTO model_calls (at, provider, model, agent, session_key, subject, surface, input_tokens, output_tokens, latency_ms, first_token_ms, outcome, status, error,
      cost_micros, currency, cached_input_tokens, automation, channel, person, delegated_by, delegators)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    call.at, call.provider, call.model, call.agent ?? null, call.sessionKey ?? null, call.subject ?? null, call.surface,
    call.inputTokens ?? null, call.outputTokens ?? null, call.latencyMs, call.firstTokenMs ?? null, call.outcome, call.status ?? null, call.error ?? null,
    call.costMicros ?? null, call.currency ?? null, call.cachedInputTokens ?? null, call.automation ?? null, call.channel ?? null, call.person ?? null, call.delegatedBy ?? null,
    chainColumn(call.delegators)))
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

  /** What an agent, an automation or a credential spent since a time, in millionths of the currency (for budgets). */
  async costSince(who: { agent?: string; automation?: string; subject?: string; subjects?: string[] }, since: number, currency: string): Promise<number> {
    await this.settled();
    if (who.subjects) {
      if (who.subjects.length === 0) return 0;
      const row = await this.store.get<Row>(`SELECT COALESCE(SUM(cost_micros), 0) AS cost FROM model_calls WHERE subject IN (${who.subjects.map(() => '?').join(', ')}) AND at >= ? AND currency = ?`,
        ...who.subjects, since, currency);
      return Number(row?.cost ?? 0);
    }
    if (who.agent !== undefined) {
      // An agent's spending includes what the runs it delegated spent, and the runs they delegated, however deep.
      const row = await this.store.get<Row>(`SELECT COALESCE(SUM(cost_micros), 0) AS cost FROM model_calls
        WHERE (agent = ? OR delegated_by = ? OR delegators LIKE ? ESCAPE '!') AND at >= ? AND currency = ?`, who.agent, who.agent, inChain(who.agent), since, currency);
      return Number(row?.cost ?? 0);
    }
    const [column, value] = who.automation !== undefined ? ['automation', who.automation] : ['subject', who.subject];
    const row = await this.store.get<Row>(`SELECT COALESCE(SUM(cost_micros), 0) AS cost FROM model_calls WHERE ${column} = ? AND at >= ? AND currency = ?`, value ?? null, since, currency);
    return Number(row?.cost ?? 0);
  }

  async summary(since: number, currency = 'USD'): Promise<UsageSummary> {
    await this.settled();
    const group = async (column: string | undefined): Promise<UsageGroup[]> => {
      const key = column ? `COALESCE(${column}, '-')` : "'all'";
      const rows = await this.store.all<Row>(`SELECT ${key} AS key, COUNT(*) AS calls, SUM(CASE WHEN outcome = 'ok' THEN 0 ELSE 1 END) AS errors,
        COALESCE(SUM(input_tokens), 0) AS input_tokens, COALESCE(SUM(output_tokens), 0) AS output_tokens,
        SUM(CASE WHEN outcome = 'ok' AND input_tokens IS NULL AND output_tokens IS NULL THEN 1 ELSE 0 END) AS uncounted, AVG(latency_ms) AS latency,
        COALESCE(SUM(CASE WHEN currency = ? THEN cost_micros ELSE 0 END), 0) AS cost,
        SUM(CASE WHEN cost_micros IS NULL AND (input_tokens IS NOT NULL OR output_tokens IS NOT NULL) THEN 1 ELSE 0 END) AS unpriced
        FROM model_calls WHERE at >= ?${column ? ` GROUP BY ${key} ORDER BY calls DESC, key` : ''}`, currency, since);
      return rows.map((row) => ({
        key: String(row.key), calls: Number(row.calls), errors: Number(row.errors), inputTokens: Number(row.input_tokens),
        outputTokens: Number(row.output_tokens), uncounted: Number(row.uncounted), latencyMsAvg: Math.round(Number(row.latency ?? 0)),
        cost: Number(row.cost ?? 0) / MICROS, unpriced: Number(row.unpriced ?? 0),
      }));
    };
    const [[total], byAgent, byModel, bySubject, bySurface, byAutomation, byChannel, byPerson, byDelegator] = await Promise.all([
      group(undefined), group('agent'), group("provider || '/' || model"), group('subject'), group('surface'), group('automation'), group('channel'), group('person'), group('delegated_by'),
    ]);
    // Who spent nothing of a kind (no automation, no channel) is left out of that kind's list.
    const named = (groups: UsageGroup[]) => groups.filter((entry) => entry.key !== '-');
    return {
      since: new Date(since).toISOString(), currency,
      total: total ?? { key: 'all', calls: 0, errors: 0, inputTokens: 0, outputTokens: 0, uncounted: 0, latencyMsAvg: 0, cost: 0, unpriced: 0 },
      byAgent, byModel, bySubject, bySurface, byAutomation: named(byAutomation), byChannel: named(byChannel), byPerson: named(byPerson), byDelegator: named(byDelegator),
    };
  }

  async prune(retentionMs: number): Promise<number> {
    return pruneRows(this.store, 'model_calls', 'id', 'at < ?', Date.now() - retentionMs);
  }
}
