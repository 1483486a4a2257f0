/**
 * PostgreSQL on the daemon's event loop, through `pg` in pipeline mode: a
 * statement is written to the server at once, without waiting for the answers
 * to the ones before it, so the statements of concurrent requests travel
 * together and wait for the server side by side instead of one after another.
 *
 * Statements on their own go over a few shared connections (the least busy
 * one); a transaction takes a connection of its own from a pool for as long as
 * it runs, sends BEGIN with its first statement and nothing at all when it
 * runs none. A lost connection makes statements fail at once as
 * "unreachable" (no waiting on a dead server) while the engine reconnects in
 * the background, with backoff.
 */
import type pg from 'pg';
import { GatewayError } from '../../shared/errors.ts';
import { redactedUrl, withPassword } from '../../shared/store-url.ts';
import { numberedParameters, POSTGRES_DIALECT } from './dialect.ts';
import type { Parameter, Row, RunResult, Tx } from './engine.ts';

export interface PostgresOptions {
  url: string;
  password?: string;
  applicationName: string;
  statementTimeoutMs?: number;
  connectTimeoutMs?: number;
  /** Connections for transactions, each held by one transaction at a time. */
  poolSize?: number;
}

/** Connections shared by statements on their own: more than one, so that one slow statement holds up only its own share. */
const SHARED_CONNECTIONS = 2;
export const DEFAULT_POOL_SIZE = 10;

/** An error PostgreSQL or the connection gave, with its SQLSTATE or system code. */
export class PostgresError extends Error {
  readonly code?: string;
  readonly unreachable: boolean;

  constructor(error: { message: string; code?: string; unreachable?: boolean }) {
    super(error.message);
    this.name = 'PostgresError';
    this.code = error.code;
    this.unreachable = error.unreachable === true;
  }
}

/** The error of a daemon or command that cannot connect to the store's PostgreSQL, with what to check. */
export function unreachableStore(url: string, error: unknown): GatewayError {
  const found = error as { message?: string; code?: string };
  const message = String(found?.message ?? error);
  return new GatewayError(`Cannot reach the store's PostgreSQL at ${redactedUrl(url)}: ${message}.`, {
    cause: error,
    hints: found?.code === '28P01' || /password/i.test(message)
      ? ['set its password: gateway secrets set store.password (or PGPASSWORD in the daemon\'s environment)']
      : ['check that the server runs and the URL names the right host, port and database'],
  });
}

const CONNECTION_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', '57P01', '57P02', '57P03', '53300']);

/** Whether an error means the connection is gone (rather than the statement being wrong). */
export function lostConnection(error: { code?: string; message?: string }): boolean {
  const code = error.code ?? '';
  if (CONNECTION_CODES.has(code) || code.startsWith('08')) return true;
  return /Connection terminated|connection timeout|timeout expired|Client has encountered a connection error|Query read timeout|not queryable|Client was closed/i.test(error.message ?? '');
}

/** A failure as the store reports it: PostgreSQL's own message and code, marked when the connection is gone. */
const asStoreError = (error: unknown): PostgresError => {
  if (error instanceof PostgresError) return error;
  const found = error as { message?: string; code?: string };
  return new PostgresError({ message: String(found?.message ?? error), code: found?.code, unreachable: lostConnection(found ?? {}) });
};

/** Rows read as SQLite gives them: 64-bit integers and numerics as numbers (the store keeps times in milliseconds), booleans as 1 and 0. */
function rowTypes(types: typeof pg.types) {
  const parsers: Record<number, (value: string) => unknown> = {
    20: (value) => Number(value),
    1700: (value) => Number(value),
    16: (value) => (value === 't' ? 1 : 0),
  };
  return {
    getTypeParser: (oid: number, format?: string) => (format !== 'binary' && parsers[oid]) || types.getTypeParser(oid, format as 'text'),
  };
}

type Mode = 'run' | 'get' | 'all';
type Named = { text: string; name: string };

export type ConnectionState = { up: boolean; message?: string; code?: string };

export class PostgresEngine {
  readonly kind = 'postgres' as const;
  readonly dialect = POSTGRES_DIALECT;
  private readonly pg: typeof pg;
  private readonly config: pg.ClientConfig;
  private shared: pg.Client[] = [];
  private readonly pool: pg.Pool;
  private readonly named = new Map<string, Named>();
  /** Why the database is out of reach, while it is: statements fail at once with it. */
  private down?: PostgresError;
  private reconnect?: NodeJS.Timeout;
  private backoffMs = 250;
  private closed = false;
  private readonly listeners = new Set<(state: ConnectionState) => void>();

  private constructor(pgModule: typeof pg, options: PostgresOptions) {
    this.pg = pgModule;
    const statementTimeoutMs = options.statementTimeoutMs ?? 10_000;
    this.config = {
      connectionString: withPassword(options.url, options.password),
      application_name: options.applicationName,
      statement_timeout: statementTimeoutMs,
      query_timeout: statementTimeoutMs + 2000,
      connectionTimeoutMillis: options.connectTimeoutMs ?? 5_000,
      keepAlive: true,
      keepAliveInitialDelayMillis: 10_000,
      types: rowTypes(pgModule.types),
      pipeline: true,
    } as pg.ClientConfig;
    this.pool = new pgModule.Pool({ ...this.config, max: options.poolSize ?? DEFAULT_POOL_SIZE, idleTimeoutMillis: 30_000 } as pg.PoolConfig);
    // A pooled connection that breaks while idle is dropped by the pool; the next transaction takes a new one.
    this.pool.on('error', () => {});
  }

  /** Connects, or throws why it cannot (as the daemon or command reports it). */
  static async open(options: PostgresOptions): Promise<PostgresEngine> {
    const { default: pgModule } = await import('pg');
    const engine = new PostgresEngine(pgModule, options);
    try {
      engine.shared = await Promise.all(Array.from({ length: SHARED_CONNECTIONS }, () => engine.connect()));
    } catch (error) {
      await engine.close();
      throw unreachableStore(options.url, error);
    }
    return engine;
  }

  private async connect(): Promise<pg.Client> {
    const client = new this.pg.Client(this.config);
    client.on('error', (error) => this.lose(client, error));
    client.on('end', () => this.lose(client, new Error('Connection terminated')));
    try {
      await client.connect();
    } catch (error) {
      void client.end().catch(() => {});
      throw error;
    }
    return client;
  }

  /** Called when the connection is lost and when it is back. */
  onConnection(listener: (state: ConnectionState) => void): void {
    this.listeners.add(listener);
  }

  /** A shared connection broke: every statement fails at once until new ones are made, in the background. */
  private lose(client: pg.Client, error: unknown): void {
    if (this.closed || !this.shared.includes(client)) return;
    this.shared = this.shared.filter((other) => other !== client);
    void client.end().catch(() => {});
    this.markDown(error);
  }

  /** The database is out of reach: said once, then reconnected with backoff. */
  private markDown(error: unknown): void {
    if (this.closed) return;
    const first = !this.down;
    const found = asStoreError(error);
    this.down = new PostgresError({ message: found.message, code: found.code, unreachable: true });
    for (const client of this.shared) void client.end().catch(() => {});
    this.shared = [];
    if (first) for (const listener of this.listeners) listener({ up: false, message: found.message, code: found.code });
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    if (this.reconnect || this.closed) return;
    this.reconnect = setTimeout(async () => {
      this.reconnect = undefined;
      try {
        const clients = await Promise.all(Array.from({ length: SHARED_CONNECTIONS }, () => this.connect()));
        if (this.closed) {
          for (const client of clients) void client.end().catch(() => {});
          return;
        }
        this.shared = clients;
        this.down = undefined;
        this.backoffMs = 250;
        for (const listener of this.listeners) listener({ up: true });
      } catch (error) {
        this.backoffMs = Math.min(this.backoffMs * 2, 5000);
        const found = asStoreError(error);
        this.down = new PostgresError({ message: found.message, code: found.code, unreachable: true });
        this.scheduleReconnect();
      }
    }, this.backoffMs);
    this.reconnect.unref();
  }

  /** The statement as PostgreSQL takes it ($1 parameters) and its name, prepared once per connection. */
  private prepared(sql: string): Named {
    let named = this.named.get(sql);
    if (!named) {
      // Statements written for PostgreSQL alone (dialect.ts) number their own parameters and may take arrays.
      named = { text: /\$1\b/.test(sql) ? sql : numberedParameters(sql), name: `s${this.named.size + 1}` };
      this.named.set(sql, named);
    }
    return named;
  }

  /** Runs a statement on a connection and gives its answer as the mode asks. */
  async query(client: pg.Client | pg.PoolClient, mode: Mode, sql: string, params: Parameter[]): Promise<unknown> {
    const { text, name } = this.prepared(sql);
    let result: pg.QueryResult;
    try {
      result = await client.query({ name, text, values: params.map((value) => (value instanceof Uint8Array ? Buffer.from(value) : value)) as unknown[] });
    } catch (error) {
      throw this.failed(error);
    }
    if (mode === 'run') return { changes: result.rowCount ?? 0 } satisfies RunResult;
    if (mode === 'get') return result.rows[0];
    return result.rows;
  }

  /** A failure met on a connection: the database is marked out of reach when the connection is gone. */
  failed(error: unknown): PostgresError {
    const found = asStoreError(error);
    if (found.unreachable) this.markDown(found);
    return found;
  }

  /** The least busy shared connection, or the reason there is none. */
  private client(): pg.Client {
    if (this.closed) throw new PostgresError({ message: 'the store is closed', unreachable: true });
    if (this.down || this.shared.length === 0) throw this.down ?? new PostgresError({ message: 'not connected', unreachable: true });
    let best = this.shared[0]!;
    for (const client of this.shared) if (pending(client) < pending(best)) best = client;
    return best;
  }

  statement(mode: Mode, sql: string, params: Parameter[]): Promise<unknown> {
    let client: pg.Client;
    try {
      client = this.client();
    } catch (error) {
      return Promise.reject(error);
    }
    return this.query(client, mode, sql, params);
  }

  /** A connection of its own for a transaction, from the pool. */
  async acquire(): Promise<pg.PoolClient> {
    if (this.closed) throw new PostgresError({ message: 'the store is closed', unreachable: true });
    if (this.down) throw this.down;
    try {
      return await this.pool.connect();
    } catch (error) {
      throw this.failed(error);
    }
  }

  async transaction<T>(work: (tx: Tx) => Promise<T>): Promise<T> {
    const tx = new PostgresTx(this);
    try {
      const result = await work(tx);
      await tx.commit();
      tx.committed();
      return result;
    } catch (error) {
      await tx.rollback();
      throw error;
    } finally {
      tx.release();
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.reconnect);
    const shared = this.shared;
    this.shared = [];
    await Promise.all([...shared.map((client) => client.end().catch(() => {})), this.pool.end().catch(() => {})]);
  }
}

/** Statements written to a shared connection and not yet answered. */
const pending = (client: pg.Client): number => {
  const queues = client as unknown as { _queryQueue?: unknown[]; _sentQueryQueue?: unknown[] };
  return (queues._queryQueue?.length ?? 0) + (queues._sentQueryQueue?.length ?? 0);
};

/**
 * A transaction on a pooled connection of its own, taken at its first
 * statement: BEGIN and SAVEPOINT go out with the statement that follows them,
 * unanswered for, and a transaction (or savepoint) that runs no statement
 * sends nothing.
 */
class PostgresTx implements Tx {
  readonly kind = 'postgres' as const;
  readonly dialect = POSTGRES_DIALECT;
  readonly lost = false;
  private readonly engine: PostgresEngine;
  private connection?: Promise<pg.PoolClient>;
  private client?: pg.PoolClient;
  /** Transaction control to send before the next statement (BEGIN, SAVEPOINT): elided if none comes. */
  private deferred: string[] = ['BEGIN'];
  /** Transaction control sent and not yet answered for: the next answer awaited says how it went. */
  private unanswered: Promise<unknown>[] = [];
  private depth = 0;
  /** The connection could not be brought back to a clean state: it is closed, not given back to the pool. */
  private broken = false;
  /** Statements sent (send) before the connection came, once they are on their way. */
  private submitted: Promise<void> = Promise.resolve();
  private readonly onCommit: (() => void)[] = [];

  constructor(engine: PostgresEngine) {
    this.engine = engine;
  }

  private async open(): Promise<pg.PoolClient> {
    this.connection ??= this.engine.acquire().then((client) => {
      this.client = client;
      return client;
    });
    const client = await this.connection;
    this.flushDeferred();
    return client;
  }

  private flushDeferred(): void {
    for (const sql of this.deferred) this.control(sql);
    this.deferred = [];
  }

  /** Sends transaction control without waiting for its answer (see unanswered). */
  private control(sql: string): void {
    const answer = this.client!.query(sql);
    answer.catch(() => {});
    this.unanswered.push(answer);
  }

  afterCommit(callback: () => void): void {
    this.onCommit.push(callback);
  }

  /** Runs what waited for the commit. */
  committed(): void {
    for (const callback of this.onCommit) callback();
  }

  /** A statement whose answer nobody waits for: written at once, ahead of what follows it (COMMIT included); its failure fails the commit. */
  send(sql: string, ...params: Parameter[]): void {
    const submit = (client: pg.PoolClient) => {
      const answer = this.engine.query(client, 'run', sql, params);
      answer.catch(() => {});
      this.unanswered.push(answer);
    };
    if (this.client) {
      this.flushDeferred();
      submit(this.client);
      return;
    }
    this.submitted = this.submitted.then(() => this.open()).then(submit, () => undefined);
  }

  /** Waits for the answers to the control sent so far; the first failure is the transaction's. */
  private async answered(): Promise<void> {
    const sent = this.unanswered;
    this.unanswered = [];
    try {
      for (const answer of sent) await answer;
    } catch (error) {
      throw this.engine.failed(error);
    }
  }

  private async statement(mode: Mode, sql: string, params: Parameter[]): Promise<any> {
    const client = await this.open();
    const control = this.answered();
    const answer = this.engine.query(client, mode, sql, params);
    try {
      await control;
    } catch (error) {
      answer.catch(() => {});
      throw error;
    }
    return answer;
  }

  run(sql: string, ...params: Parameter[]): Promise<RunResult> {
    return this.statement('run', sql, params);
  }

  get<T = Row>(sql: string, ...params: Parameter[]): Promise<T | undefined> {
    return this.statement('get', sql, params);
  }

  all<T = Row>(sql: string, ...params: Parameter[]): Promise<T[]> {
    return this.statement('all', sql, params);
  }

  async exec(sql: string): Promise<void> {
    const client = await this.open();
    const control = this.answered();
    const answer = client.query(sql);
    try {
      await control;
    } catch (error) {
      answer.catch(() => {});
      throw error;
    }
    try {
      await answer;
    } catch (error) {
      throw this.engine.failed(error);
    }
  }

  async transaction<T>(work: (tx: Tx) => Promise<T>): Promise<T> {
    await this.submitted;
    const mark = this.onCommit.length;
    const savepoint = `SAVEPOINT sp${++this.depth}`;
    this.deferred.push(savepoint);
    // Whether the savepoint reached the server: it did once a statement ran under it.
    const sent = () => {
      if (this.deferred.at(-1) !== savepoint) return true;
      this.deferred.pop();
      return false;
    };
    try {
      const result = await work(this);
      if (sent()) this.control(`RELEASE sp${this.depth}`);
      return result;
    } catch (error) {
      // What waited for the commit of what was undone waits for nothing.
      this.onCommit.length = mark;
      if (sent()) {
        try {
          await this.answered().catch(() => {});
          await this.client!.query(`ROLLBACK TO sp${this.depth}`);
          this.control(`RELEASE sp${this.depth}`);
        } catch (undoError) {
          this.broken = true;
          this.engine.failed(undoError);
        }
      }
      throw error;
    } finally {
      this.depth--;
    }
  }

  async commit(): Promise<void> {
    // Never opened, or still opening (a statement failed before its connection came): nothing to commit.
    if (this.connection) await this.connection.catch(() => {});
    await this.submitted;
    if (!this.client) return;
    if (this.broken) throw new PostgresError({ message: 'the transaction could not be undone in part and was rolled back' });
    // COMMIT goes out behind whatever is still unanswered, in the same round trip.
    const committed = this.client.query('COMMIT');
    committed.catch(() => {});
    let result: pg.QueryResult;
    try {
      await this.answered();
      result = await committed;
    } catch (error) {
      throw this.engine.failed(error);
    }
    // COMMIT of a transaction that failed part-way answers ROLLBACK, without an error.
    if (result.command === 'ROLLBACK') throw new PostgresError({ message: 'the transaction failed and was rolled back' });
  }

  async rollback(): Promise<void> {
    if (this.connection) await this.connection.catch(() => {});
    await this.submitted;
    if (!this.client || this.broken) return;
    try {
      await this.answered().catch(() => {});
      await this.client.query('ROLLBACK');
    } catch (error) {
      // The connection is gone (PostgreSQL rolled the transaction back) or unusable.
      this.broken = true;
      this.engine.failed(error);
    }
  }

  release(): void {
    const client = this.client;
    this.client = undefined;
    client?.release(this.broken ? true : undefined);
  }
}
