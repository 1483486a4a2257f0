import { AsyncLocalStorage } from 'node:async_hooks';
import diagnostics from 'node:diagnostics_channel';
import { statSync } from 'node:fs';
import { daemonOfApplicationName } from '../../shared/store-url.ts';
import { ATTACHED_DAEMONS, DATABASE_SIZE, type EngineKind, SINGLETON_HOLDER } from './dialect.ts';
import type { Db, Dialect, Parameter, Row, RunResult, Tx } from './engine.ts';
import { StorageHealth } from './faults.ts';
import { applyMigrations, type Migration, type ModuleMigrations, STORE_MIGRATIONS } from './migrations.ts';
import { type PostgresCoordinator, type Singleton, SINGLETON_LOCK_CLASS } from './postgres-coordinator.ts';
import { PostgresEngine } from './postgres-engine.ts';
import { DEFAULT_AUTOCHECKPOINT_PAGES, SqliteEngine } from './sqlite-engine.ts';
import type { WriterTurns } from './writer-turns.ts';

export type { Db, Dialect, Row, Tx };

/** A statement or a transaction of the store, finished: what it was, on which engine, how long it took. Published only while someone (the metrics module) listens. */
export interface StatementObserved { engine: EngineKind; operation: 'read' | 'write' | 'transaction'; outcome: 'ok' | 'error'; seconds: number }
export const statementsObserved = diagnostics.channel('gateway.store.statement');
export { inTransaction } from './engine.ts';

/** What an audit event says besides its kind. */
export interface AuditFields {
  actor?: string;
  subject?: string;
  address?: string;
  detail?: Record<string, unknown>;
}

export interface StoreOptions {
  /** The SQLite file, when the profile keeps its state on this host. */
  path: string;
  /** normal survives a crash of the daemon (WAL); full also survives power loss. */
  synchronous: 'normal' | 'full';
  /** A postgres:// URL: the state is kept in PostgreSQL, shared with every daemon that names it. */
  url?: string;
  /** The database password, from the secret store (never in the URL kept in config). */
  password?: string;
  /** How this daemon appears in PostgreSQL's list of sessions. */
  applicationName?: string;
  /** Connections for transactions on PostgreSQL. */
  poolSize?: number;
  /** A thread that may block waits for SQLite's write lock in its busy handler (see SqliteOptions). */
  blocking?: boolean;
  /** false: another connection of the daemon migrated the store already (a thread's own connection). */
  migrate?: boolean;
}

/**
 * With GATEWAY_STORE_CHECKS=1 (the tests), a statement run on the store while
 * the same flow of work holds a transaction fails at once: it would wait for
 * that transaction forever on SQLite, and run outside it on PostgreSQL.
 */
const checks = process.env.GATEWAY_STORE_CHECKS === '1' ? new AsyncLocalStorage<{ open: boolean }>() : undefined;

const outsideTransaction = (): void => {
  if (checks?.getStore()?.open) throw new Error('a statement ran on the store inside a transaction: run it on the transaction (tx) instead');
};

/** Runs a transaction's work marked as inside it, for the checks above; work it leaves running afterwards is outside. */
async function marked<T>(work: (tx: Tx) => Promise<T>, tx: Tx): Promise<T> {
  const state = { open: true };
  try {
    return await checks!.run(state, () => work(tx));
  } finally {
    state.open = false;
  }
}

/**
 * The profile's state: one SQLite database in WAL mode on this host, or a
 * PostgreSQL database several daemons share. The features speak the same SQL
 * to both, asynchronously; each feature migrates its own tables (see
 * migrations.ts).
 */
export class Store implements Db {
  readonly kind: EngineKind;
  readonly dialect: Dialect;
  private readonly engine: SqliteEngine | PostgresEngine;
  /** The last storage failure (a full disk, a database out of reach), until a write works again. */
  readonly health = new StorageHealth();
  /** With PostgreSQL: what the daemons sharing the database agree on (singletons, events). */
  coordinator?: PostgresCoordinator;
  /** The singletons this daemon takes part in. */
  readonly singletonNames = new Set<string>();

  private constructor(engine: SqliteEngine | PostgresEngine) {
    this.engine = engine;
    this.kind = engine.kind;
    this.dialect = engine.dialect;
    if (engine instanceof PostgresEngine) {
      engine.onConnection((state) => {
        if (state.up) this.health.succeeded();
        else this.health.failed(Object.assign(new Error(state.message ?? 'connection lost'), { code: state.code, unreachable: true }));
      });
    }
  }

  /** Opens the store and applies the store's own migrations (the features apply theirs with migrate). */
  static async open(options: StoreOptions): Promise<Store> {
    const engine = options.url
      ? await PostgresEngine.open({ url: options.url, password: options.password, applicationName: options.applicationName ?? 'gateway', poolSize: options.poolSize })
      : new SqliteEngine(options.path, { synchronous: options.synchronous, blocking: options.blocking });
    const store = new Store(engine);
    if (options.migrate === false) return store;
    try {
      await store.migrate([{ module: 'store', migrations: STORE_MIGRATIONS }]);
    } catch (error) {
      await store.close();
      throw error;
    }
    return store;
  }

  /**
   * Applies what is missing of each module's migrations, in the order given,
   * each once: the tables a feature owns are declared in its folder.
   */
  migrate(modules: readonly ModuleMigrations[]): Promise<void> {
    return applyMigrations(this, modules);
  }

  run(sql: string, ...params: Parameter[]): Promise<RunResult> {
    return this.statement('run', sql, params) as Promise<RunResult>;
  }

  get<T = Row>(sql: string, ...params: Parameter[]): Promise<T | undefined> {
    return this.statement('get', sql, params) as Promise<T | undefined>;
  }

  all<T = Row>(sql: string, ...params: Parameter[]): Promise<T[]> {
    return this.statement('all', sql, params) as Promise<T[]>;
  }

  private statement(mode: 'run' | 'get' | 'all', sql: string, params: Parameter[]): Promise<unknown> {
    if (checks) outsideTransaction();
    const pending = this.engine.statement(mode, sql, params).catch((error: unknown) => {
      this.health.failed(error);
      throw error;
    });
    return statementsObserved.hasSubscribers ? this.observed(pending, mode === 'run' ? 'write' : 'read') : pending;
  }

  /** Publishes how long a statement or a transaction took, once it settles. */
  private observed<T>(pending: Promise<T>, operation: StatementObserved['operation']): Promise<T> {
    const started = performance.now();
    const tell = (outcome: StatementObserved['outcome']) => {
      const message: StatementObserved = { engine: this.kind, operation, outcome, seconds: (performance.now() - started) / 1000 };
      statementsObserved.publish(message);
    };
    return pending.then((value) => {
      tell('ok');
      return value;
    }, (error: unknown) => {
      tell('error');
      throw error;
    });
  }

  /**
   * Runs work in one transaction: all of it commits, or none of it does. The
   * work runs its statements on `tx`, never on the store.
   */
  async transaction<T>(work: (tx: Tx) => Promise<T>): Promise<T> {
    if (checks) outsideTransaction();
    try {
      const running = this.engine.transaction(checks ? (tx) => marked(work, tx) : work);
      const result = await (statementsObserved.hasSubscribers ? this.observed(running, 'transaction') : running);
      this.health.succeeded();
      return result;
    } catch (error) {
      this.health.failed(error);
      throw error;
    }
  }

  /**
   * A write that records what happened (an audit event, when a device was last
   * seen) rather than what a request asks for: when the storage fails (a full
   * disk) it is skipped, so the request itself is still answered; the failure
   * is noted in the store's health.
   */
  async bookkeeping(write: () => Promise<unknown>): Promise<void> {
    try {
      await write();
    } catch (error) {
      if (!this.health.failed(error)) throw error;
    }
  }

  /** Told of a failure of the store's own bookkeeping (an audit event) that no caller waits for. */
  onUnexpected?: (error: unknown, what: string) => void;

  /**
   * Records an audit event; detail never carries a secret. In the caller's
   * transaction, when it gives one, it fails with it; on its own it never
   * fails (see bookkeeping), so nobody need wait for it.
   */
  audit(kind: string, fields: AuditFields = {}, tx?: Tx): Promise<void> {
    const write = (db: Db) => db.run('INSERT INTO audit_events (at, kind, actor, subject, address, detail) VALUES (?, ?, ?, ?, ?, ?)',
      Date.now(), kind, fields.actor ?? null, fields.subject ?? null, fields.address ?? null, fields.detail ? JSON.stringify(fields.detail) : null);
    if (tx) return write(tx).then(() => undefined);
    return this.bookkeeping(() => write(this)).catch((error: unknown) => this.onUnexpected?.(error, 'an audit event'));
  }

  /** Audit events since a time, newest first. */
  auditEvents(since: number, limit: number): Promise<Row[]> {
    return this.all('SELECT * FROM audit_events WHERE at >= ? ORDER BY id DESC LIMIT ?', since, limit);
  }

  /** How many WAL pages the SQLite connection lets accumulate before it checkpoints inline during a commit. */
  setAutocheckpoint(pages = DEFAULT_AUTOCHECKPOINT_PAGES): void {
    if (!(this.engine instanceof SqliteEngine)) return;
    this.engine.setAutocheckpoint(pages);
    this.autocheckpointPages = pages;
    for (const listener of this.autocheckpointListeners) listener(pages);
  }

  /** The WAL pages set by setAutocheckpoint, for another connection of the daemon to follow (onAutocheckpoint). */
  autocheckpointPages = DEFAULT_AUTOCHECKPOINT_PAGES;
  private readonly autocheckpointListeners = new Set<(pages: number) => void>();

  onAutocheckpoint(listener: (pages: number) => void): void {
    this.autocheckpointListeners.add(listener);
  }

  /** Takes turns at SQLite's write lock with another thread of the daemon from now on; undefined: alone again. */
  shareWriteLock(turns: WriterTurns | undefined): void {
    if (this.engine instanceof SqliteEngine) this.engine.turns = turns;
  }

  /** The turns set by shareWriteLock, if any. */
  get writeLockTurns(): WriterTurns | undefined {
    return this.engine instanceof SqliteEngine ? this.engine.turns : undefined;
  }

  /**
   * Work exactly one daemon of the gateway does (a channel's connection). Alone
   * on its SQLite file a daemon always holds it; sharing PostgreSQL, the daemon
   * that takes its advisory lock does, and another takes over when it dies.
   */
  singleton(name: string, handlers: Singleton): void {
    this.singletonNames.add(name);
    if (this.coordinator) this.coordinator.singleton(name, handlers);
    else void Promise.resolve(handlers.start());
  }

  /** The daemons attached to a shared store, as PostgreSQL lists their sessions; undefined on SQLite. */
  async attached(): Promise<{ instanceId: string; profile: string; address: string | null; connectedAt: number | null }[] | undefined> {
    if (this.kind !== 'postgres') return undefined;
    const rows = await this.all<{ name: string; address: string | null; since: number | null }>(ATTACHED_DAEMONS);
    return rows.map((row) => ({ ...daemonOfApplicationName(String(row.name)), address: row.address ?? null, connectedAt: row.since ?? null }));
  }

  /** The daemons attached to a shared store now, by instance id; undefined on SQLite, where a daemon is alone. */
  async liveDaemons(): Promise<string[] | undefined> {
    return (await this.attached())?.map((daemon) => daemon.instanceId);
  }

  /** Which daemon holds each singleton now, by instance id (null: none); this daemon's own view on SQLite. */
  async singletonHolders(names: readonly string[], self: string): Promise<{ name: string; holder: string | null }[]> {
    if (this.kind !== 'postgres') return names.map((name) => ({ name, holder: self }));
    return Promise.all(names.map(async (name) => {
      const row = await this.get<{ holder: string }>(SINGLETON_HOLDER, String(SINGLETON_LOCK_CLASS), name);
      return { name, holder: row ? daemonOfApplicationName(String(row.holder)).instanceId : null };
    }));
  }

  /** How much room the state takes: the database's size on PostgreSQL, the file and its WAL on SQLite. */
  async sizeBytes(path: string): Promise<number | null> {
    if (this.kind === 'postgres') return Number((await this.get<{ bytes: number }>(DATABASE_SIZE))?.bytes ?? 0);
    let total = 0;
    for (const file of [path, `${path}-wal`]) {
      try {
        total += statSync(file).size;
      } catch {
        // no such file
      }
    }
    return total;
  }

  /** Schema versions of each module's own tables. */
  async moduleVersions(): Promise<Record<string, number>> {
    const rows = await this.all<{ module: string; version: number }>('SELECT module, MAX(version) AS version FROM module_migrations GROUP BY module ORDER BY module');
    return Object.fromEntries(rows.map((row) => [row.module, Number(row.version)]));
  }

  /** How many migrations the store has taken, all modules together: it only grows, with each upgrade that changes a table. */
  async schemaVersion(): Promise<number> {
    return Number((await this.get<{ count: number }>('SELECT COUNT(*) AS count FROM module_migrations'))?.count ?? 0);
  }

  async close(): Promise<void> {
    await this.engine.close();
  }
}

export type { Migration };
