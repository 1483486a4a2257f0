import { DatabaseSync, type StatementSync } from 'node:sqlite';
import { MIGRATIONS, type Migration } from './migrations.ts';

export interface StoreOptions {
  path: string;
  /** normal survives a crash of the daemon (WAL); full also survives power loss. */
  synchronous: 'normal' | 'full';
}

/** The profile's state: one SQLite database in WAL mode, migrated at start. */
export class Store {
  readonly db: DatabaseSync;
  private readonly statements = new Map<string, StatementSync>();
  private depth = 0;

  constructor(options: StoreOptions, migrations: readonly Migration[] = MIGRATIONS) {
    this.db = new DatabaseSync(options.path);
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
    const savepoint = `sp${++this.depth}`;
    this.db.exec(nested ? `SAVEPOINT ${savepoint}` : 'BEGIN IMMEDIATE');
    try {
      const result = work();
      this.db.exec(nested ? `RELEASE ${savepoint}` : 'COMMIT');
      return result;
    } catch (error) {
      this.db.exec(nested ? `ROLLBACK TO ${savepoint}; RELEASE ${savepoint}` : 'ROLLBACK');
      throw error;
    } finally {
      this.depth--;
    }
  }

  /** Records an audit event; detail never carries a secret. */
  audit(kind: string, fields: { actor?: string; subject?: string; address?: string; detail?: Record<string, unknown> } = {}): void {
    this.prepare('INSERT INTO audit_events (at, kind, actor, subject, address, detail) VALUES (?, ?, ?, ?, ?, ?)').run(
      Date.now(), kind, fields.actor ?? null, fields.subject ?? null, fields.address ?? null,
      fields.detail ? JSON.stringify(fields.detail) : null,
    );
  }

  close(): void {
    if (this.db.isOpen) this.db.close();
  }
}
