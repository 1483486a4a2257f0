/**
 * Schema migrations, applied in order at daemon start. Each runs once, inside a
 * transaction, and is recorded in schema_migrations. SQL stays portable to
 * Postgres: no SQLite-only types or functions in table definitions.
 */
export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'meta and audit events',
    sql: `
      CREATE TABLE meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
      );
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
];
