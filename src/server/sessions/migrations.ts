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
  {
    version: 4,
    name: 'full-text search of messages',
    // SQLite: an FTS5 index over the messages' text, kept by triggers (messages are written once and pruned with their
    // session). PostgreSQL: a GIN index on the text's search vector, which its own full-text search uses.
    sql: `
      CREATE VIRTUAL TABLE session_messages_fts USING fts5(text, content='session_messages', content_rowid='id', tokenize='unicode61 remove_diacritics 2');
      INSERT INTO session_messages_fts (rowid, text) SELECT id, text FROM session_messages;
      CREATE TRIGGER session_messages_fts_insert AFTER INSERT ON session_messages BEGIN
        INSERT INTO session_messages_fts (rowid, text) VALUES (new.id, new.text);
      END;
      CREATE TRIGGER session_messages_fts_delete AFTER DELETE ON session_messages BEGIN
        INSERT INTO session_messages_fts (session_messages_fts, rowid, text) VALUES ('delete', old.id, old.text);
      END;
      CREATE TRIGGER session_messages_fts_update AFTER UPDATE OF text ON session_messages BEGIN
        INSERT INTO session_messages_fts (session_messages_fts, rowid, text) VALUES ('delete', old.id, old.text);
        INSERT INTO session_messages_fts (rowid, text) VALUES (new.id, new.text);
      END;
      CREATE INDEX session_messages_via ON session_messages (via, session_key);
    `,
    postgres: `
      CREATE INDEX session_messages_fts_search ON session_messages USING GIN (to_tsvector('simple', text));
      CREATE INDEX session_messages_via ON session_messages (via, session_key);
    `,
  },
  {
    version: 5,
    name: 'the person who said each turn',
    // What earlier messages tell: a channel's inbound message is its sender's (peer:<channel>:<account>:<sender>); a
    // turn of `gateway chat` is the operator's; an automation's prompt in a session of its own is the automation's.
    // A turn of the inference API names no user: it stays no one's, so its session is found only by an agent whose
    // memory is shared (agents.<id>.memory.scope agent).
    sql: `
      ALTER TABLE session_messages ADD COLUMN person TEXT;
      UPDATE session_messages SET person = (
        SELECT 'peer:' || s.channel || ':' || s.account || ':' || session_messages.sender FROM sessions s
        WHERE s.key = session_messages.session_key AND s.channel NOT IN ('chat', 'api', 'automation')
      ) WHERE direction = 'in' AND role IS NULL;
      UPDATE session_messages SET person = 'operator'
      WHERE direction = 'in' AND COALESCE(role, 'user') = 'user' AND COALESCE(kind, 'message') = 'message' AND session_key LIKE 'chat:%';
      UPDATE session_messages SET person = sender
      WHERE direction = 'in' AND COALESCE(role, 'user') = 'user' AND COALESCE(kind, 'message') = 'message' AND session_key LIKE 'automation:%' AND sender LIKE 'automation:%';
      CREATE INDEX session_messages_person ON session_messages (person, session_key) WHERE person IS NOT NULL;
      CREATE INDEX session_messages_session_person ON session_messages (session_key, person) WHERE person IS NOT NULL;
    `,
  },
];
