/** The tables the sessions module owns: conversations and their history. */
import type { Migration } from '../store/migrations.ts';

export const SESSION_MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'sessions and their messages',
    was: { schema: 5 },
    sql: `
      CREATE TABLE sessions (
        key TEXT PRIMARY KEY,
        channel TEXT NOT NULL,
        account TEXT NOT NULL,
        kind TEXT NOT NULL,
        peer TEXT NOT NULL,
        peer_name TEXT,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        message_count INTEGER NOT NULL DEFAULT 0
      );
      CREATE INDEX sessions_updated ON sessions (updated_at);
      CREATE TABLE session_messages (
        id INTEGER PRIMARY KEY,
        session_key TEXT NOT NULL,
        direction TEXT NOT NULL,
        sender TEXT NOT NULL,
        sender_name TEXT,
        text TEXT NOT NULL,
        at BIGINT NOT NULL,
        via TEXT
      );
      CREATE INDEX session_messages_session ON session_messages (session_key, id);
    `,
  },
  {
    version: 2,
    name: 'session wake-ups',
    was: { schema: 6 },
    sql: 'ALTER TABLE sessions ADD COLUMN wake_requested_at BIGINT',
  },
  {
    version: 3,
    name: 'steps of agent runs in session history',
    was: { module: 'sessions', version: 1 },
    sql: `
      ALTER TABLE session_messages ADD COLUMN role TEXT;
      ALTER TABLE session_messages ADD COLUMN kind TEXT;
      ALTER TABLE session_messages ADD COLUMN data TEXT;
      ALTER TABLE session_messages ADD COLUMN run_id TEXT;
    `,
  },
];
