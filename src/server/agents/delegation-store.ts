/**
 * Delegations in the profile's database: which session handed which task to
 * which agent, the child's session (`delegate:<parent session>:<n>`), how its
 * answer goes back (to the waiting tool call, or as a new turn of the parent's
 * conversation), and how it ended. A row is finished once, by the attempt
 * that ends it; the answer is handed back once.
 */
import type { DelegationView } from '../../shared/protocol/results.ts';
import type { Db, Store } from '../store/database.ts';
import type { Migration } from '../store/migrations.ts';
import { pruneRows } from '../store/retention.ts';

export const DELEGATION_MIGRATIONS: readonly Migration[] = [{
  version: 3,
  name: 'delegations between agents',
  sql: `
    CREATE TABLE delegations (
      session_key TEXT PRIMARY KEY,
      parent_session TEXT NOT NULL,
      n INTEGER NOT NULL,
      parent_agent TEXT NOT NULL,
      agent TEXT NOT NULL,
      depth INTEGER NOT NULL,
      task TEXT NOT NULL,
      person TEXT NOT NULL,
      job_id TEXT NOT NULL,
      mode TEXT NOT NULL,
      waiter TEXT,
      status TEXT NOT NULL,
      run_id TEXT,
      answer TEXT,
      error TEXT,
      input_tokens INTEGER,
      output_tokens INTEGER,
      created_at BIGINT NOT NULL,
      finished_at BIGINT,
      delivered_at BIGINT
    );
    CREATE UNIQUE INDEX delegations_parent ON delegations (parent_session, n);
    CREATE INDEX delegations_running ON delegations (status) WHERE status = 'running';
  `,
}, {
  version: 4,
  name: 'a delegation spends the credential or automation whose run made it',
  sql: 'ALTER TABLE delegations ADD COLUMN subject TEXT;',
}, {
  version: 5,
  name: 'a delegation knows every agent above it, up to the run that started the chain',
  sql: 'ALTER TABLE delegations ADD COLUMN delegators TEXT;',
}];

/** How a child's answer goes back: to the tool call waiting for it, or as a new turn of the parent's conversation. */
export type DelegationMode = 'wait' | 'turn';

export interface Delegation {
  sessionKey: string;
  parentSession: string;
  n: number;
  parentAgent: string;
  agent: string;
  depth: number;
  task: string;
  person: string;
  /** Whose spending the delegating run was (a credential, an automation): the child's model calls spend it too, under its budgets. */
  subject: string | null;
  /**
   * The agents above the child, the first the one whose run started the
   * chain, the last its parent: each one's budget and depth limit holds for
   * the child, however deep.
   */
  delegators: string[];
  jobId: string;
  mode: DelegationMode;
  waiter: string | null;
  status: 'running' | 'succeeded' | 'failed';
  runId: string | null;
  answer: string | null;
  error: string | null;
  inputTokens: number | null;
  outputTokens: number | null;
  createdAt: number;
  finishedAt: number | null;
  deliveredAt: number | null;
}

interface Row {
  session_key: string; parent_session: string; n: number; parent_agent: string; agent: string; depth: number; task: string; person: string;
  subject: string | null; delegators: string | null; job_id: string; mode: DelegationMode; waiter: string | null; status: Delegation['status']; run_id: string | null; answer: string | null;
  error: string | null; input_tokens: number | null; output_tokens: number | null; created_at: number; finished_at: number | null; delivered_at: number | null;
}

const toDelegation = (row: Row): Delegation => ({
  sessionKey: row.session_key, parentSession: row.parent_session, n: Number(row.n), parentAgent: row.parent_agent, agent: row.agent, depth: Number(row.depth),
  task: row.task, person: row.person, subject: row.subject ?? null,
  // A row made before the chain was kept knows its parent only.
  delegators: row.delegators ? JSON.parse(row.delegators) as string[] : [row.parent_agent], jobId: row.job_id, mode: row.mode, waiter: row.waiter, status: row.status, runId: row.run_id, answer: row.answer,
  error: row.error, inputTokens: row.input_tokens, outputTokens: row.output_tokens, createdAt: Number(row.created_at),
  finishedAt: row.finished_at === null ? null : Number(row.finished_at), deliveredAt: row.delivered_at === null ? null : Number(row.delivered_at),
});

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

/** A delegation as operators see it (the person it acts for is not shown). */
export const delegationView = (row: Delegation): DelegationView => ({
  sessionKey: row.sessionKey, parentSession: row.parentSession, parentAgent: row.parentAgent, agent: row.agent, depth: row.depth, task: row.task,
  wait: row.mode === 'wait', status: row.status, jobId: row.jobId, runId: row.runId, answer: row.answer, error: row.error,
  usage: { ...(row.inputTokens === null ? {} : { inputTokens: row.inputTokens }), ...(row.outputTokens === null ? {} : { outputTokens: row.outputTokens }) },
  createdAt: iso(row.createdAt)!, finishedAt: iso(row.finishedAt), deliveredAt: iso(row.deliveredAt),
});

/** The outcome of a child's run, as its delegation keeps it. */
export interface DelegationOutcome {
  status: 'succeeded' | 'failed';
  runId: string | null;
  answer: string | null;
  error: string | null;
  usage: { inputTokens?: number; outputTokens?: number };
}

export class DelegationStore {
  private readonly store: Store;

  constructor(store: Store) {
    this.store = store;
  }

  async get(sessionKey: string, db: Db = this.store): Promise<Delegation | undefined> {
    const row = await db.get<Row>('SELECT * FROM delegations WHERE session_key = ?', sessionKey);
    return row ? toDelegation(row) : undefined;
  }

  /** The delegations a session made, in the order it made them. */
  async children(parentSession: string): Promise<Delegation[]> {
    return (await this.store.all<Row>('SELECT * FROM delegations WHERE parent_session = ? ORDER BY n', parentSession)).map(toDelegation);
  }

  /** How many delegations of a session are running now. */
  async running(parentSession: string, db: Db = this.store): Promise<number> {
    return Number((await db.get<{ count: number }>("SELECT COUNT(*) AS count FROM delegations WHERE parent_session = ? AND status = 'running'", parentSession))?.count ?? 0);
  }

  /** The number the session's next delegation takes. */
  async nextNumber(parentSession: string, db: Db): Promise<number> {
    return Number((await db.get<{ last: number | null }>('SELECT MAX(n) AS last FROM delegations WHERE parent_session = ?', parentSession))?.last ?? 0) + 1;
  }

  async insert(row: Omit<Delegation, 'status' | 'runId' | 'answer' | 'error' | 'inputTokens' | 'outputTokens' | 'finishedAt' | 'deliveredAt'>, db: Db): Promise<void> {
    await db.run(`INSERT INTO delegations (session_key, parent_session, n, parent_agent, agent, depth, task, person, subject, delegators, job_id, mode, waiter, status, created_at)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'running', ?)`,
    row.sessionKey, row.parentSession, row.n, row.parentAgent, row.agent, row.depth, row.task, row.person, row.subject, JSON.stringify(row.delegators), row.jobId, row.mode, row.waiter, row.createdAt);
  }

  /**
   * Ends a running delegation with its child's outcome; undefined when it
   * had ended already (an earlier attempt did it). Returns the row as ended:
   * its mode then says who takes the answer.
   */
  async finish(sessionKey: string, outcome: DelegationOutcome, db: Db): Promise<Delegation | undefined> {
    const row = await db.get<Row>(`UPDATE delegations SET status = ?, run_id = ?, answer = ?, error = ?, input_tokens = ?, output_tokens = ?, finished_at = ?
      WHERE session_key = ? AND status = 'running' RETURNING *`,
    outcome.status, outcome.runId, outcome.answer, outcome.error, outcome.usage.inputTokens ?? null, outcome.usage.outputTokens ?? null, Date.now(), sessionKey);
    return row ? toDelegation(row) : undefined;
  }

  /**
   * The waiting tool call gives up waiting: the answer is to come as a new
   * turn. False when the child ended first (its answer is there to take).
   */
  async stopWaiting(sessionKey: string): Promise<boolean> {
    return (await this.store.run("UPDATE delegations SET mode = 'turn', waiter = NULL WHERE session_key = ? AND status = 'running' AND mode = 'wait'", sessionKey)).changes === 1;
  }

  /** Marks an answer handed back (to the waiting call, or as a turn); false when it was already. */
  async delivered(sessionKey: string, db: Db = this.store): Promise<boolean> {
    return (await db.run('UPDATE delegations SET delivered_at = ? WHERE session_key = ? AND delivered_at IS NULL', Date.now(), sessionKey)).changes === 1;
  }

  /**
   * Delegations whose waiting tool call died with its daemon (alone on its
   * store, every waiting one at start; sharing one, those of daemons no
   * longer attached): a running one's answer is to come as a turn; an ended
   * one's answer, never taken, is returned to be handed back now.
   */
  async orphans(): Promise<Delegation[]> {
    const live = await this.store.liveDaemons();
    const gone = live ? ` AND (waiter IS NULL OR waiter NOT IN (${live.map(() => '?').join(', ')}))` : '';
    await this.store.run(`UPDATE delegations SET mode = 'turn', waiter = NULL WHERE status = 'running' AND mode = 'wait'${gone}`, ...(live ?? []));
    return (await this.store.all<Row>(`SELECT * FROM delegations WHERE status <> 'running' AND mode = 'wait' AND delivered_at IS NULL${gone}`, ...(live ?? []))).map(toDelegation);
  }

  /** Whether a daemon is attached to the store (a waiter that may still take its answer). */
  async attached(daemon: string | null): Promise<boolean> {
    if (daemon === null) return false;
    const live = await this.store.liveDaemons();
    return live === undefined || live.includes(daemon);
  }

  async prune(retentionMs: number): Promise<number> {
    return pruneRows(this.store, 'delegations', 'session_key', "status <> 'running' AND created_at < ?", Date.now() - retentionMs);
  }
}
