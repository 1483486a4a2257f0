/**
 * The migration runner. Each feature declares its own tables as a list of
 * migrations in its folder (its module's `migrations`); they are applied in
 * order at daemon start, each once, recorded per module in
 * module_migrations. SQL stays portable to PostgreSQL: no SQLite-only types
 * or functions in table definitions (dialect.ts translates the one spelling
 * that differs).
 *
 * Databases made before each feature owned its tables recorded one shared
 * schema version (schema_migrations) beside a few modules' own: the first
 * start of this version keeps those records as legacy_* tables, and each
 * module's migrations say (`was`) which of those records already made them,
 * so nothing is made twice.
 */
import { configError } from '../../shared/errors.ts';
import { type EngineKind, MIGRATION_LOCK, postgresDdl } from './dialect.ts';
import type { Db, Tx } from './engine.ts';

export interface Migration {
  version: number;
  name: string;
  sql: string;
  /**
   * What PostgreSQL runs instead of `sql`, where the engines differ (a
   * full-text index: an FTS5 table kept by triggers on SQLite, a GIN index on
   * PostgreSQL). Without it, PostgreSQL runs `sql` with its types mapped.
   */
  postgres?: string;
  /** What made this change in a database from before the feature owned its tables: the shared schema's version, or a module's own. */
  was?: { schema: number } | { module: string; version: number };
}

/** A module's migrations, as the runner takes them. */
export interface ModuleMigrations {
  module: string;
  migrations: readonly Migration[];
}

/** The store's own table: audit events, which every feature records. */
export const STORE_MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'audit events',
    was: { schema: 1 },
    sql: `
      CREATE TABLE audit_events (
        id INTEGER PRIMARY KEY,
        at BIGINT NOT NULL,
        kind TEXT NOT NULL,
        actor TEXT,
        subject TEXT,
        address TEXT,
        detail TEXT
      );
      CREATE INDEX audit_events_at ON audit_events (at);
    `,
  },
  {
    version: 2,
    name: 'no meta table',
    // Made with the audit events by the first schema and never used.
    sql: 'DROP TABLE IF EXISTS meta',
  },
];

const CREATE_RECORDS = 'CREATE TABLE IF NOT EXISTS module_migrations (module TEXT NOT NULL, version INTEGER NOT NULL, name TEXT NOT NULL, applied_at BIGINT NOT NULL, PRIMARY KEY (module, version))';

const TABLE_EXISTS: Record<EngineKind, string> = {
  sqlite: "SELECT 1 AS found FROM sqlite_schema WHERE type = 'table' AND name = ?",
  postgres: 'SELECT 1 AS found FROM pg_tables WHERE schemaname = current_schema() AND tablename = ?',
};

const exists = async (tx: Db, table: string): Promise<boolean> => (await tx.get(TABLE_EXISTS[tx.kind], table)) !== undefined;

/** The records of a database from before feature-owned migrations, kept aside once as legacy_* tables. */
async function keepLegacyRecords(tx: Tx): Promise<void> {
  if (!(await exists(tx, 'schema_migrations'))) return;
  await tx.exec('ALTER TABLE schema_migrations RENAME TO legacy_schema_migrations');
  if (await exists(tx, 'module_migrations')) await tx.exec('ALTER TABLE module_migrations RENAME TO legacy_module_migrations');
}

interface Legacy {
  schema: number;
  modules: Set<string>;
}

async function legacyRecords(tx: Db): Promise<Legacy | undefined> {
  if (!(await exists(tx, 'legacy_schema_migrations'))) return undefined;
  const schema = Number((await tx.get<{ version: number | null }>('SELECT MAX(version) AS version FROM legacy_schema_migrations'))?.version ?? 0);
  const modules = (await exists(tx, 'legacy_module_migrations'))
    ? (await tx.all<{ module: string; version: number }>('SELECT module, version FROM legacy_module_migrations')).map((row) => `${row.module}@${Number(row.version)}`)
    : [];
  return { schema, modules: new Set(modules) };
}

const madeBefore = (migration: Migration, legacy: Legacy): boolean => {
  const was = migration.was;
  if (!was) return false;
  return 'schema' in was ? legacy.schema >= was.schema : legacy.modules.has(`${was.module}@${was.version}`);
};

const record = (tx: Db, module: string, migration: Migration) =>
  tx.run('INSERT INTO module_migrations (module, version, name, applied_at) VALUES (?, ?, ?, ?)', module, migration.version, migration.name, Date.now());

/**
 * Applies what is missing of each module's migrations, in one transaction; on
 * PostgreSQL under an advisory lock, so that of several daemons starting
 * together on one database one migrates and the others find the work done.
 */
export async function applyMigrations(store: Db, modules: readonly ModuleMigrations[]): Promise<void> {
  await store.transaction(async (tx) => {
    if (tx.kind === 'postgres') await tx.exec(MIGRATION_LOCK);
    await keepLegacyRecords(tx);
    await tx.exec(CREATE_RECORDS);
    const legacy = await legacyRecords(tx);
    for (const { module, migrations } of modules) {
      const rows = await tx.all<{ version: number }>('SELECT version FROM module_migrations WHERE module = ?', module);
      const applied = rows.reduce((max, row) => Math.max(max, Number(row.version)), 0);
      const known = migrations.at(-1)?.version ?? 0;
      if (applied > known) {
        throw configError(`The store has module ${module} at schema version ${applied}, newer than this gateway understands (${known}): a newer gateway migrated it.`, [
          'upgrade gateway on this host to the version the other daemons run',
        ]);
      }
      let adopting = rows.length === 0 && legacy !== undefined;
      for (const migration of migrations) {
        if (migration.version <= applied) continue;
        // What an older gateway made already is recorded, not made again; the first change it did not make ends that.
        adopting &&= madeBefore(migration, legacy!);
        if (!adopting) await tx.exec(tx.kind === 'postgres' ? postgresDdl(migration.postgres ?? migration.sql) : migration.sql);
        await record(tx, module, migration);
      }
    }
  });
}
