/**
 * A profile's SQLite state copied into an empty PostgreSQL database, in one
 * transaction: the tables as SQLite holds their definitions (portable SQL,
 * with the one spelling dialect.ts translates), every row, the indexes, and
 * the row-id sequences moved past the copied ids. A failure leaves the
 * database as it was. Run by `gateway store migrate`, with the daemon stopped.
 */
import { DatabaseSync } from 'node:sqlite';
import { GatewayError } from '../../shared/errors.ts';
import { redactedUrl } from '../../shared/store-url.ts';
import { MIGRATION_LOCK, postgresDdl } from './dialect.ts';
import type { Parameter } from './engine.ts';
import { PostgresEngine } from './postgres-engine.ts';

/** Rows per INSERT: one round trip for this many. */
const BATCH = 200;

export interface Copied {
  schemaVersion: number;
  tables: number;
  rows: number;
}

/** Whether the database holds a gateway's data already (its migration records, of this version or an earlier one). */
const HOLDS_DATA = `SELECT COUNT(*) AS found FROM pg_tables WHERE schemaname = current_schema()
  AND tablename IN ('module_migrations', 'schema_migrations', 'legacy_schema_migrations')`;

export async function copySqliteToPostgres(path: string, url: string, password: string | undefined, progress: (line: string) => void): Promise<Copied> {
  const source = new DatabaseSync(path, { readOnly: true });
  let engine: PostgresEngine | undefined;
  try {
    engine = await PostgresEngine.open({ url, password, applicationName: 'gateway-store-migrate' });
    const found = await engine.statement('get', HOLDS_DATA, []) as { found: number };
    if (Number(found.found) > 0) {
      throw new GatewayError(`${redactedUrl(url)} already holds a gateway's data: migrate only into an empty database.`, {
        hints: ['create an empty database for this profile: createdb -O <user> <name>', `or point the profile at it as it is: gateway config set store.url ${redactedUrl(url)}`],
      });
    }
    // One consistent view of the source, one transaction on the target.
    source.exec('BEGIN');
    const everyTable = source.prepare("SELECT name, sql FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name").all() as { name: string; sql: string }[];
    // A full-text index (an FTS5 table over another, with its shadow tables and triggers) is not copied: PostgreSQL gets its own kind.
    const searches = everyTable.filter((table) => /^CREATE VIRTUAL TABLE/i.test(table.sql)).map((table) => ({ name: table.name, ...fullTextOf(table.sql) }));
    const tables = everyTable.filter((table) => !searches.some((search) => table.name === search.name || table.name.startsWith(`${search.name}_`)));
    const indexes = source.prepare("SELECT sql FROM sqlite_schema WHERE type = 'index' AND sql IS NOT NULL").all() as { sql: string }[];
    const recorded = tables.some((table) => table.name === 'module_migrations')
      ? Number((source.prepare('SELECT COUNT(*) AS count FROM module_migrations').get() as { count: number }).count) : 0;
    let rows = 0;
    await engine.transaction(async (tx) => {
      // The lock daemons take to migrate: none starts on the database half-copied.
      await tx.exec(MIGRATION_LOCK);
      for (const table of tables) await tx.exec(postgresDdl(table.sql));
      for (const table of tables) {
        const columns = (source.prepare('SELECT name FROM pragma_table_info(?) ORDER BY cid').all(table.name) as { name: string }[]).map((column) => column.name);
        const list = columns.map((column) => `"${column}"`).join(', ');
        const row = `(${columns.map(() => '?').join(', ')})`;
        let batch: Parameter[] = [];
        let count = 0;
        const flush = async () => {
          if (batch.length === 0) return;
          const n = batch.length / columns.length;
          const values = batch;
          batch = [];
          await tx.run(`INSERT INTO "${table.name}" (${list}) VALUES ${Array.from({ length: n }, () => row).join(', ')}`, ...values);
        };
        for (const record of source.prepare(`SELECT * FROM "${table.name}"`).iterate() as Iterable<Record<string, Parameter>>) {
          for (const column of columns) batch.push(record[column] ?? null);
          count++;
          if (count % BATCH === 0) await flush();
        }
        await flush();
        rows += count;
        // Row ids that number themselves go on from the highest copied.
        const identity = /(\w+)\s+INTEGER PRIMARY KEY/.exec(table.sql)?.[1];
        if (identity) await tx.exec(`SELECT setval(pg_get_serial_sequence('"${table.name}"', '${identity}'), COALESCE((SELECT MAX("${identity}") FROM "${table.name}"), 0) + 1, false)`);
        progress(`${table.name}: ${count} rows`);
      }
      for (const index of indexes) await tx.exec(index.sql);
      for (const search of searches) {
        if (search.table && search.column) await tx.exec(`CREATE INDEX "${search.name}_search" ON "${search.table}" USING GIN (to_tsvector('simple', "${search.column}"))`);
      }
    });
    source.exec('COMMIT');
    return { schemaVersion: recorded, tables: tables.length, rows };
  } finally {
    await engine?.close();
    if (source.isOpen) source.close();
  }
}

/** The table and column an FTS5 table indexes (its external content), from its definition. */
function fullTextOf(sql: string): { table?: string; column?: string } {
  const columns = /USING\s+fts5\s*\(([^)]*)\)/i.exec(sql)?.[1] ?? '';
  const table = /content\s*=\s*'([A-Za-z0-9_]+)'/i.exec(columns)?.[1];
  const column = columns.split(',').map((part) => part.trim()).find((part) => part && !part.includes('='));
  return { table, column };
}
