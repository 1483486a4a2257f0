import { statSync } from 'node:fs';
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import { GatewayError } from '../../shared/errors.ts';
import { StorageHealth } from './faults.ts';
import { MIGRATIONS, type Migration } from './migrations.ts';

export interface StoreOptions {
  path: string;
  /** normal survives a crash of the daemon (WAL); full also survives power loss. */
  synchronous: 'normal' | 'full';
}

const SQLITE_CORRUPT = 11;
const SQLITE_NOTADB = 26;

/**
 * Opens the profile's database, refusing one that is damaged instead of
 * failing later with a bare SQLite error, and never taking an emptied file
 * for a new database: SQLite writes a database's header when it makes one, so
 * a file of 0 bytes is a database that lost its content (a truncation, a
 * failed copy), and starting afresh on it would drop every token, device and
 * job without a word.
 */
function openDatabase(path: string): DatabaseSync {
  const size = (() => {
    try {
      return statSync(path).size;
    } catch {
      return undefined;
    }
  })();
  const aside = `mv ${path} ${path}.broken   # the profile then starts with empty state: tokens, devices, jobs and sessions are gone`;
  if (size === 0) {
    throw new GatewayError(`${path} is empty (0 bytes): the profile's database lost its content. It was left as it is.`, {
      hints: [`restore it from a backup (with its -wal file, if any)`, `or set it aside: ${aside}`],
    });
  }
  let db: DatabaseSync | undefined;
  try {
    db = new DatabaseSync(path);
    // Reading the schema reads the header and the first page: a file that is not a database says so here.
    db.prepare('SELECT count(*) FROM sqlite_schema').get();
    return db;
  } catch (error) {
    db?.close();
    const code = ((error as { errcode?: number }).errcode ?? 0) & 0xff;
    const damaged = code === SQLITE_CORRUPT || code === SQLITE_NOTADB;
    throw new GatewayError(`${path} ${damaged ? 'is damaged' : 'cannot be opened'}: ${(error as Error).message}. It was left as it is.`, {
      cause: error,
      hints: damaged ? ['restore it from a backup (with its -wal file, if any)', `or set it aside: ${aside}`] : [`check the file and its folder: ls -l ${path}`],
    });
  }
}

/** The profile's state: one SQLite database in WAL mode, migrated at start. */
export class Store {
  readonly db: DatabaseSync;
  private readonly statements = new Map<string, StatementSync>();
  /** The last storage failure (a full disk), until a write works again. */
  readonly health = new StorageHealth();
  private depth = 0;

  constructor(options: StoreOptions, migrations: readonly Migration[] = MIGRATIONS) {
    this.db = openDatabase(options.path);
    this.db.exec('PRAGMA journal_mode = WAL');
    this.db.exec(`PRAGMA synchronous = ${options.synchronous === 'full' ? 'FULL' : 'NORMAL'}`);
    this.db.exec('PRAGMA foreign_keys = ON');
    this.db.exec('PRAGMA busy_timeout = 5000');
    // A larger page cache and fewer, larger checkpoints: the daemon is the database's only writer.
    this.db.exec('PRAGMA cache_size = -16000');
    this.setAutocheckpoint();
    this.db.exec('PRAGMA temp_store = MEMORY');
    this.migrate(migrations);
  }

  /** How many WAL pages this connection lets accumulate before it checkpoints inline during a commit. */
  setAutocheckpoint(pages = 4000): void {
    this.db.exec(`PRAGMA wal_autocheckpoint = ${Math.trunc(pages)}`);
  }

  get schemaVersion(): number {
    const row = this.db.prepare('SELECT MAX(version) AS version FROM schema_migrations').get() as { version: number | null };
    return row.version ?? 0;
  }

  private migrate(migrations: readonly Migration[]): void {
    this.db.exec('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)');
    const applied = this.schemaVersion;
    const known = migrations.at(-1)?.version ?? 0;
    if (applied > known) {
      throw new Error(`state.db has schema version ${applied}, newer than this gateway understands (${known}); upgrade gateway`);
    }
    for (const migration of migrations) {
      if (migration.version <= applied) continue;
      this.transaction(() => {
        this.db.exec(migration.sql);
        this.db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(migration.version, migration.name, Date.now());
      });
    }
  }

  /**
   * Applies a module's own migrations, in order, each once, in a transaction:
   * the tables a feature owns are declared in its folder. Versions count per
   * module, recorded in module_migrations.
   */
  migrateModule(module: string, migrations: readonly Migration[]): void {
    this.db.exec('CREATE TABLE IF NOT EXISTS module_migrations (module TEXT NOT NULL, version INTEGER NOT NULL, name TEXT NOT NULL, applied_at BIGINT NOT NULL, PRIMARY KEY (module, version))');
    const row = this.db.prepare('SELECT MAX(version) AS version FROM module_migrations WHERE module = ?').get(module) as { version: number | null };
    const applied = row.version ?? 0;
    const known = migrations.at(-1)?.version ?? 0;
    if (applied > known) {
      throw new Error(`state.db has module ${module} at schema version ${applied}, newer than this gateway understands (${known}); upgrade gateway`);
    }
    for (const migration of migrations) {
      if (migration.version <= applied) continue;
      this.transaction(() => {
        this.db.exec(migration.sql);
        this.db.prepare('INSERT INTO module_migrations (module, version, name, applied_at) VALUES (?, ?, ?, ?)').run(module, migration.version, migration.name, Date.now());
      });
    }
  }

  /** A prepared statement, compiled once per daemon: preparing costs more than running. */
  prepare(sql: string): StatementSync {
    let statement = this.statements.get(sql);
    if (!statement) {
      statement = this.db.prepare(sql);
      this.statements.set(sql, statement);
    }
    return statement;
  }

  /**
   * Runs work in one transaction: all of it commits, or none of it does. Inside
   * another transaction it is a savepoint of that one.
   */
  transaction<T>(work: () => T): T {
    const nested = this.db.isTransaction;
    const savepoint = `sp${this.depth + 1}`;
    try {
      this.db.exec(nested ? `SAVEPOINT ${savepoint}` : 'BEGIN IMMEDIATE');
    } catch (error) {
      this.health.failed(error);
      throw error;
    }
    this.depth++;
    try {
      const result = work();
      this.db.exec(nested ? `RELEASE ${savepoint}` : 'COMMIT');
      if (!nested) this.health.succeeded();
      return result;
    } catch (error) {
      // SQLite rolls a transaction back by itself after some failures (a full disk): only what is still open is undone here,
      // and a rollback that fails says less than the error that caused it.
      if (this.db.isTransaction) {
        try {
          this.db.exec(nested ? `ROLLBACK TO ${savepoint}; RELEASE ${savepoint}` : 'ROLLBACK');
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
    if (this.db.isOpen) this.db.close();
  }
}
