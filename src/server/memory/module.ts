/**
 * An agent's memory: memory.search over its own conversations (the sessions
 * it answered in) and the notes it kept, memory.get of one of them whole, and
 * memory.note to keep something. Full-text search is the store's own: SQLite
 * FTS5, PostgreSQL's text search on a shared store. An agent reads only its
 * own sessions and notes; over HTTP the tools act as the default agent.
 */
import agentsModule from '../agents/module.ts';
import { DomainError } from '../kernel/errors.ts';
import { defineModule, type ToolContext } from '../kernel/module.ts';
import sessionsModule, { searchWords } from '../sessions/module.ts';

interface NoteRow { id: number; agent: string; session_key: string | null; text: string; created_at: number }

const MAX_NOTE = 4000;

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

export default defineModule({
  id: 'memory',
  needs: [agentsModule, sessionsModule],
  migrations: [{
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
  }],
  setup(ctx) {
    const { store } = ctx;
    const agents = ctx.use(agentsModule);
    const sessions = ctx.use(sessionsModule).store;

    /** The agent a call acts as: the calling agent, else the default one. */
    const agentOf = (context: ToolContext): string => context.agent ?? agents.resolve().id;

    const searchNotes = async (agent: string, query: string, limit: number) => {
      const words = searchWords(query);
      if (words.length === 0) return [];
      if (store.kind === 'postgres') {
        return store.all<NoteRow & { excerpt: string }>(`SELECT n.*, ts_headline('simple', n.text, q, 'StartSel=[, StopSel=], MaxWords=24, MinWords=8') AS excerpt
          FROM memory_notes n, plainto_tsquery('simple', ?) q WHERE n.agent = ? AND to_tsvector('simple', n.text) @@ q
          ORDER BY ts_rank(to_tsvector('simple', n.text), q) DESC, n.id DESC LIMIT ?`, words.join(' '), agent, limit);
      }
      return store.all<NoteRow & { excerpt: string }>(`SELECT n.*, snippet(memory_notes_fts, 0, '[', ']', '…', 16) AS excerpt
        FROM memory_notes_fts JOIN memory_notes n ON n.id = memory_notes_fts.rowid
        WHERE memory_notes_fts MATCH ? AND n.agent = ? ORDER BY bm25(memory_notes_fts), n.id DESC LIMIT ?`,
      words.map((word) => `"${word}"`).join(' '), agent, limit);
    };

    ctx.tools.add({
      name: 'memory.search',
      description: 'Search your past conversations and your notes for words (all of them must occur); the best matches first, each with an excerpt and an id for memory.get.',
      inputSchema: {
        type: 'object', additionalProperties: false, required: ['query'],
        properties: { query: { type: 'string', minLength: 1, maxLength: 500 }, limit: { type: 'integer', minimum: 1, maximum: 50 } },
      },
      handler: async (args, context) => {
        const agent = agentOf(context);
        const query = String(args.query);
        if (searchWords(query).length === 0) throw new DomainError('invalid', 'The query has no words to search for.');
        const limit = Number(args.limit ?? 10);
        const [messages, notes] = await Promise.all([sessions.search(query, `agent:${agent}`, limit), searchNotes(agent, query, limit)]);
        // Notes first among equals: the agent kept them on purpose.
        const results = [
          ...notes.map((note) => ({ id: `note:${note.id}`, kind: 'note' as const, at: new Date(Number(note.created_at)).toISOString(), sessionKey: note.session_key, excerpt: note.excerpt })),
          ...messages.map((message) => ({
            id: `message:${message.id}`, kind: 'message' as const, at: new Date(message.at).toISOString(), sessionKey: message.sessionKey, role: message.role, excerpt: message.excerpt,
          })),
        ].slice(0, limit);
        return { query, results };
      },
    });

    ctx.tools.add({
      name: 'memory.get',
      description: 'Read one result of memory.search whole: a note, or a message of one of your conversations with the messages just before and after it.',
      inputSchema: { type: 'object', additionalProperties: false, required: ['id'], properties: { id: { type: 'string', pattern: '^(note|message):[0-9]{1,15}$' } } },
      handler: async (args, context) => {
        const agent = agentOf(context);
        const [kind, raw] = String(args.id).split(':') as ['note' | 'message', string];
        const id = Number(raw);
        if (kind === 'note') {
          const note = await store.get<NoteRow>('SELECT * FROM memory_notes WHERE id = ? AND agent = ?', id, agent);
          if (!note) throw new DomainError('not_found', `No note ${args.id} of agent ${agent}.`);
          return { id: `note:${note.id}`, kind, text: note.text, sessionKey: note.session_key, at: new Date(Number(note.created_at)).toISOString() };
        }
        const message = await sessions.message(id);
        // Another agent's conversation is not there for this one: the same answer as a message that does not exist.
        if (!message || !(await sessions.tookPart(message.sessionKey, `agent:${agent}`))) throw new DomainError('not_found', `No message ${args.id} in agent ${agent}'s conversations.`);
        const around = await sessions.history(message.sessionKey, { limit: 2, before: message.id });
        const after = await sessions.after(message.sessionKey, message.id, 2);
        const view = (one: typeof message) => ({ id: `message:${one.id}`, role: one.role, sender: one.senderName ?? one.sender, at: new Date(one.at).toISOString(), text: one.text });
        return { kind, sessionKey: message.sessionKey, ...view(message), before: around.map(view), after: after.map(view) };
      },
    });

    ctx.tools.add({
      name: 'memory.note',
      description: 'Keep a note for later (a fact, a preference, a decision); memory.search finds it.',
      inputSchema: { type: 'object', additionalProperties: false, required: ['text'], properties: { text: { type: 'string', minLength: 1, maxLength: MAX_NOTE } } },
      handler: async (args, context) => {
        const agent = agentOf(context);
        const text = String(args.text).trim();
        if (!text) throw new DomainError('invalid', 'A note needs some text.');
        const row = await store.get<{ id: number }>('INSERT INTO memory_notes (agent, session_key, text, created_at) VALUES (?, ?, ?, ?) RETURNING id',
          agent, context.sessionKey ?? null, text, Date.now());
        return { id: `note:${row!.id}`, agent, kept: true };
      },
    });
  },
});
