/**
 * The notes agents keep (memory.note), each for the person the call acted
 * for, searchable with the store's own full-text search (SQLite FTS5,
 * PostgreSQL's text search on a shared store).
 */
import type { Store } from '../store/database.ts';
import type { Migration } from '../store/migrations.ts';
import { searchWords } from '../sessions/module.ts';

export interface NoteRow { id: number; agent: string; session_key: string | null; person: string | null; text: string; created_at: number }

/** Whose memory a call is in: an agent's, and, unless the agent shares one memory among its people, a person's. */
export interface Memory { agent: string; person?: string }

/** The notes, the same on both engines; their full-text index is each engine's own. */
const NOTES = `
      CREATE TABLE memory_notes (
        id INTEGER PRIMARY KEY,
        agent TEXT NOT NULL,
        session_key TEXT,
        text TEXT NOT NULL,
        created_at BIGINT NOT NULL
      );
      CREATE INDEX memory_notes_agent ON memory_notes (agent, id);
`;

/** The migration that gives each note its person; `find` is the engine's name for the position of a string in another. */
function noteOwners(find: 'instr' | 'strpos'): string {
  const at = `${find}(session_key, ':dm:')`;
  return `
      ALTER TABLE memory_notes ADD COLUMN person TEXT;
      UPDATE memory_notes SET person = 'peer:' || substr(session_key, 1, ${at} - 1) || ':' || substr(session_key, ${at} + 4)
      WHERE ${at} > 0 AND session_key NOT LIKE '%#%' AND session_key NOT LIKE 'chat:%' AND session_key NOT LIKE 'api:%' AND session_key NOT LIKE 'automation:%';
      UPDATE memory_notes SET person = 'operator' WHERE session_key LIKE 'chat:%';
      CREATE INDEX memory_notes_person ON memory_notes (agent, person, id);
  `;
}

export const MEMORY_MIGRATIONS: readonly Migration[] = [{
  version: 1,
  name: 'agents\' notes, searchable',
  sql: `${NOTES}
      CREATE VIRTUAL TABLE memory_notes_fts USING fts5(text, content='memory_notes', content_rowid='id', tokenize='unicode61 remove_diacritics 2');
      CREATE TRIGGER memory_notes_fts_insert AFTER INSERT ON memory_notes BEGIN
        INSERT INTO memory_notes_fts (rowid, text) VALUES (new.id, new.text);
      END;
      CREATE TRIGGER memory_notes_fts_delete AFTER DELETE ON memory_notes BEGIN
        INSERT INTO memory_notes_fts (memory_notes_fts, rowid, text) VALUES ('delete', old.id, old.text);
      END;
    `,
  postgres: `${NOTES}
      CREATE INDEX memory_notes_fts_search ON memory_notes USING GIN (to_tsvector('simple', text));
    `,
}, {
  version: 2,
  name: 'each note\'s person',
  // A note from before is the person's whose direct conversation its session key names: a channel's peer
  // (<channel>:<account>:dm:<sender>), the operator in a `gateway chat` session. A note kept in a room, over HTTP
  // without a session, in an inference API session (which never kept its user) or in an email thread (whose key
  // holds more than its sender) is no one's: only an agent whose memory is shared (memory.scope agent) finds it.
  sql: noteOwners('instr'),
  postgres: noteOwners('strpos'),
}];

/** The notes of a memory, as SQL: a condition on the note `n` and its parameters. */
const notesOf = (memory: Memory) => (memory.person === undefined
  ? { where: 'n.agent = ?', params: [memory.agent] }
  : { where: 'n.agent = ? AND n.person = ?', params: [memory.agent, memory.person] });

export class Notes {
  private readonly store: Store;
  private readonly now: () => number;

  constructor(store: Store, now: () => number = Date.now) {
    this.store = store;
    this.now = now;
  }

  /** The notes of a memory holding every word of a query, best first, each with an excerpt. */
  async search(memory: Memory, query: string, limit: number): Promise<(NoteRow & { excerpt: string })[]> {
    const words = searchWords(query);
    if (words.length === 0) return [];
    const { where, params } = notesOf(memory);
    const match = this.store.dialect.fullText({ table: 'memory_notes', alias: 'n', column: 'text', index: 'memory_notes_fts', words });
    return this.store.all<NoteRow & { excerpt: string }>(`SELECT n.*, ${match.excerpt} AS excerpt FROM ${match.from}
      WHERE ${match.where} AND ${where} ORDER BY ${match.rank}, n.id DESC LIMIT ?`, match.param, ...params, limit);
  }

  /** A note of a memory; undefined when it is not there (or is another agent's or person's). */
  get(memory: Memory, id: number): Promise<NoteRow | undefined> {
    const { where, params } = notesOf(memory);
    return this.store.get<NoteRow>(`SELECT * FROM memory_notes n WHERE n.id = ? AND ${where}`, id, ...params);
  }

  /** Keeps a note of an agent's for a person; its id. */
  async keep(note: { agent: string; sessionKey: string | null; person: string; text: string }): Promise<number> {
    const row = await this.store.get<{ id: number }>('INSERT INTO memory_notes (agent, session_key, person, text, created_at) VALUES (?, ?, ?, ?, ?) RETURNING id',
      note.agent, note.sessionKey, note.person, note.text, this.now());
    return row!.id;
  }
}
