import { statSync } from 'node:fs';
import { configError } from '../../shared/errors.ts';
import { daemonOfApplicationName } from '../../shared/store-url.ts';
import { ATTACHED_DAEMONS, BEGIN, DATABASE_SIZE, type EngineKind, MIGRATION_LOCK, postgresDdl, SINGLETON_HOLDER } from './dialect.ts';
import type { Engine, Parameter, Statement } from './engine.ts';
import { StorageHealth } from './faults.ts';
import { MIGRATIONS, type Migration } from './migrations.ts';
import { type PostgresCoordinator, type Singleton, SINGLETON_LOCK_CLASS } from './postgres-coordinator.ts';
import { PostgresEngine } from './postgres-engine.ts';
import { DEFAULT_AUTOCHECKPOINT_PAGES, SqliteEngine } from './sqlite-engine.ts';
import type { WriterTurns } from './writer-turns.ts';

/** Statements that write (and so take SQLite's write lock when run outside a transaction). */
const WRITES = /^\s*(?:INSERT|UPDATE|DELETE|REPLACE)\b/i;

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
}

/**
 * The profile's state: one SQLite database in WAL mode on this host, or a
 * PostgreSQL database several daemons share. Migrated at start; the features
 * speak the same SQL to both.
 */
export class Store {
  readonly engine: Engine;
  readonly kind: EngineKind;
  private readonly statements = new Map<string, Statement>();
  /** The last storage failure (a full disk, a database out of reach), until a write works again. */
  readonly health = new StorageHealth();
  private depth = 0;
  /** With PostgreSQL: what the daemons sharing the database agree on (singletons, events). */
  coordinator?: PostgresCoordinator;
  /** The singletons this daemon takes part in. */
  readonly singletonNames = new Set<string>();

  constructor(options: StoreOptions, migrations: readonly Migration[] = MIGRATIONS) {
    if (options.url) {
      const engine = new PostgresEngine({ url: options.url, password: options.password, applicationName: options.applicationName ?? 'gateway' });
      engine.onConnection((state) => {
        if (state.up) this.health.succeeded();
        else this.health.failed(Object.assign(new Error(state.message ?? 'connection lost'), { code: state.code, unreachable: true }));
      });
      this.engine = engine;
    } else {
      this.engine = new SqliteEngine(options.path, options.synchronous);
    }
    this.kind = this.engine.kind;
    try {
      this.applyMigrations('schema_migrations', undefined, migrations);
    } catch (error) {
      this.close();
      throw error;
    }
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

  get schemaVersion(): number {
    const row = this.engine.prepare('SELECT MAX(version) AS version FROM schema_migrations').get() as { version: number | null };
    return row.version ?? 0;
  }

  private ddl(sql: string): string {
    return this.kind === 'postgres' ? postgresDdl(sql) : sql;
  }

  /**
   * Applies what is missing of a list of migrations, in one transaction per
   * migration on SQLite, and all at once under an advisory lock on PostgreSQL:
   * of several daemons starting together on one database, one migrates and
   * the others then find the work done.
   */
  private applyMigrations(table: string, owner: string | undefined, migrations: readonly Migration[]): void {
    const scope = owner === undefined ? '' : ' WHERE module = ?';
    const keys = owner === undefined ? [] : [owner];
    const create = owner === undefined
      ? 'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)'
      : 'CREATE TABLE IF NOT EXISTS module_migrations (module TEXT NOT NULL, version INTEGER NOT NULL, name TEXT NOT NULL, applied_at BIGINT NOT NULL, PRIMARY KEY (module, version))';
    const pending = (): Migration[] => {
      const row = this.engine.prepare(`SELECT MAX(version) AS version FROM ${table}${scope}`).get(...keys) as { version: number | null };
      const applied = row.version ?? 0;
      const known = migrations.at(-1)?.version ?? 0;
      if (applied > known) {
        const what = owner === undefined ? 'schema version' : `module ${owner} at schema version`;
        throw configError(`the store has ${what} ${applied}, newer than this gateway understands (${known}): a newer gateway migrated it`, [
          'upgrade gateway on this host to the version the other daemons run',
        ]);
      }
      return migrations.filter((migration) => migration.version > applied);
    };
    const record = (migration: Migration) => {
      this.engine.exec(this.ddl(migration.sql));
      if (owner === undefined) this.engine.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(migration.version, migration.name, Date.now());
      else this.engine.prepare('INSERT INTO module_migrations (module, version, name, applied_at) VALUES (?, ?, ?, ?)').run(owner, migration.version, migration.name, Date.now());
    };
    if (this.kind === 'postgres') {
      this.transaction(() => {
        this.engine.exec(MIGRATION_LOCK);
        this.engine.exec(create);
        for (const migration of pending()) record(migration);
      });
      return;
    }
    this.engine.exec(create);
    for (const migration of pending()) this.transaction(() => record(migration));
  }

  /**
   * Applies a module's own migrations, in order, each once, in a transaction:
   * the tables a feature owns are declared in its folder. Versions count per
   * module, recorded in module_migrations.
   */
  migrateModule(module: string, migrations: readonly Migration[]): void {
    this.applyMigrations('module_migrations', module, migrations);
  }

  /** A prepared statement, compiled once per daemon: preparing costs more than running. */
  prepare(sql: string): Statement {
    let statement = this.statements.get(sql);
    if (!statement) {
      statement = this.engine.prepare(sql);
      if (this.engine instanceof SqliteEngine && WRITES.test(sql)) statement = this.inTurn(statement);
      this.statements.set(sql, statement);
    }
    return statement;
  }

  /** Turns at the write lock with another thread writing the same SQLite file, while it runs (see WriterTurns). */
  private turns?: WriterTurns;

  /** Takes turns at the write lock with another thread of the daemon from now on; undefined: alone again. */
  shareWriteLock(turns: WriterTurns | undefined): void {
    this.turns = turns;
  }

  /** The turns set by shareWriteLock, if any. */
  get writeLockTurns(): WriterTurns | undefined {
    return this.turns;
  }

  /** A write statement that, run outside a transaction, takes its turn at the write lock like a transaction. */
  private inTurn(statement: Statement): Statement {
    // Inside a transaction the transaction took the turn: the statement runs as it is, with nothing made for it.
    const inTurn = <K extends keyof Statement>(method: K) => (...params: Parameter[]): ReturnType<Statement[K]> => {
      const turns = this.turns;
      if (this.depth > 0 || !turns) return statement[method](...params) as ReturnType<Statement[K]>;
      return turns.take(() => statement[method](...params) as ReturnType<Statement[K]>);
    };
    return { run: inTurn('run'), get: inTurn('get'), all: inTurn('all') };
  }

  /** Whether a transaction is open on the daemon's connection. */
  private get open(): boolean {
    return this.engine instanceof SqliteEngine ? this.engine.db.isTransaction : this.depth > 0;
  }

  /**
   * Whether the transaction this code runs in is gone: SQLite rolls a whole
   * transaction back by itself after some failures (a full disk), savepoints
   * and all. Code that catches a savepoint's failure to go on must then
   * rethrow instead: what it would write next would commit on its own.
   */
  get transactionLost(): boolean {
    return this.depth > 0 && !this.open;
  }

  /**
   * Runs work in one transaction: all of it commits, or none of it does. Inside
   * another transaction it is a savepoint of that one.
   */
  transaction<T>(work: () => T): T {
    const nested = this.depth > 0;
    const turns = nested ? undefined : this.turns;
    return turns ? turns.take(() => this.inTransaction(nested, work)) : this.inTransaction(nested, work);
  }

  private inTransaction<T>(nested: boolean, work: () => T): T {
    const savepoint = `sp${this.depth + 1}`;
    try {
      this.engine.exec(nested ? `SAVEPOINT ${savepoint}` : BEGIN[this.kind]);
    } catch (error) {
      this.health.failed(error);
      throw error;
    }
    this.depth++;
    try {
      const result = work();
      this.engine.exec(nested ? `RELEASE ${savepoint}` : 'COMMIT');
      // A commit says the storage works again, unless it never reached PostgreSQL (a transaction without statements).
      if (!nested && !(this.engine instanceof PostgresEngine && this.engine.elided)) this.health.succeeded();
      return result;
    } catch (error) {
      // SQLite rolls a transaction back by itself after some failures (a full disk): only what is still open is undone here,
      // and a rollback that fails says less than the error that caused it.
      if (this.open) {
        try {
          this.engine.exec(nested ? `ROLLBACK TO ${savepoint}; RELEASE ${savepoint}` : 'ROLLBACK');
        } catch {
          // the original error is the one to report
        }
      }
      this.health.failed(error);
      throw error;
    } finally {
      this.depth--;
    }
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

  /**
   * The daemons attached to a shared store now, by instance id, as PostgreSQL
   * lists its sessions; undefined on SQLite, where a daemon is alone.
   */
  liveDaemons(): string[] | undefined {
    return this.attached()?.map((daemon) => daemon.instanceId);
  }

  /** The daemons attached to a shared store, as PostgreSQL lists their sessions; undefined on SQLite. */
  attached(): { instanceId: string; profile: string; address: string | null; connectedAt: number | null }[] | undefined {
    if (this.kind !== 'postgres') return undefined;
    const rows = this.prepare(ATTACHED_DAEMONS).all() as { name: string; address: string | null; since: number | null }[];
    return rows.map((row) => ({ ...daemonOfApplicationName(String(row.name)), address: row.address ?? null, connectedAt: row.since ?? null }));
  }

  /** Which daemon holds each singleton now, by instance id (null: none); this daemon's own view on SQLite. */
  singletonHolders(names: readonly string[], self: string): { name: string; holder: string | null }[] {
    if (this.kind !== 'postgres') return names.map((name) => ({ name, holder: self }));
    return names.map((name) => {
      const row = this.prepare(SINGLETON_HOLDER).get(String(SINGLETON_LOCK_CLASS), name) as { holder: string } | undefined;
      return { name, holder: row ? daemonOfApplicationName(String(row.holder)).instanceId : null };
    });
  }

  /** How much room the state takes: the database's size on PostgreSQL, the file and its WAL on SQLite. */
  sizeBytes(path: string): number | null {
    if (this.kind === 'postgres') return Number((this.prepare(DATABASE_SIZE).get() as { bytes: number }).bytes);
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

  /** Schema versions of the modules' own tables. */
  moduleVersions(): Record<string, number> {
    const rows = this.prepare('SELECT module, MAX(version) AS version FROM module_migrations GROUP BY module ORDER BY module').all() as { module: string; version: number }[];
    return Object.fromEntries(rows.map((row) => [row.module, Number(row.version)]));
  }

  /** Records an audit event; detail never carries a secret. */
  audit(kind: string, fields: { actor?: string; subject?: string; address?: string; detail?: Record<string, unknown> } = {}): void {
    this.bookkeeping(() => this.prepare('INSERT INTO audit_events (at, kind, actor, subject, address, detail) VALUES (?, ?, ?, ?, ?, ?)').run(
      Date.now(), kind, fields.actor ?? null, fields.subject ?? null, fields.address ?? null,
      fields.detail ? JSON.stringify(fields.detail) : null,
    ));
  }

  /**
   * A write that records what happened (an audit event, when a device was last
   * seen) rather than what a request asks for: when the storage fails (a full
   * disk) it is skipped, so the request itself is still answered; the failure
   * is noted in the store's health.
   */
  bookkeeping(write: () => void): void {
    try {
      write();
    } catch (error) {
      if (!this.health.failed(error)) throw error;
    }
  }

  close(): void {
    this.engine.close();
  }
}
