/**
 * Conversations with their history: one per channel, account and peer (or
 * room), and one per agent conversation started elsewhere (chat, WebChat, the
 * inference API). A message is a turn of a person or the assistant, or a
 * step of a run: a tool call, its result, an error.
 */
import { sessionKey, type SessionKind } from '../../shared/channels.ts';
import type { MessageView, SessionView } from '../../shared/protocol/results.ts';
import type { Db, Store } from '../store/database.ts';

export interface Session {
  key: string;
  channel: string;
  account: string;
  kind: SessionKind;
  peer: string;
  peerName: string | null;
  createdAt: number;
  updatedAt: number;
  messageCount: number;
}

export type MessageRole = 'user' | 'assistant' | 'tool' | 'system';
export type MessageKind = 'message' | 'tool_call' | 'tool_result' | 'error' | 'summary';

export interface SessionMessage {
  id: number;
  sessionKey: string;
  direction: 'in' | 'out';
  sender: string;
  senderName: string | null;
  text: string;
  at: number;
  /** Who sent an outbound message (an operator's device id, an agent), when known. */
  via: string | null;
  role: MessageRole;
  kind: MessageKind;
  /** A step's facts: a tool call's id, name and arguments; a result; the model, usage and latency of an assistant turn. */
  data: Record<string, unknown> | null;
  /** The agent run this message belongs to. */
  runId: string | null;
  /** Whose words a turn is (src/server/kernel/person.ts); null for the agent's messages, steps of runs, and turns of no one known. */
  person: string | null;
}

/** Where a session lives: a channel's peer or room, or an agent conversation (channel "chat" or "api"). */
export interface SessionAddress {
  channel: string;
  account: string;
  kind: SessionKind;
  peer: string;
  peerName?: string;
  /** The agent the session is kept for, when a channel's route names one other than the channel's own (channels/routes.ts). */
  agent?: string;
}

export interface NewEntry {
  direction: 'in' | 'out';
  sender: string;
  senderName?: string;
  text: string;
  at: number;
  via?: string;
  role?: MessageRole;
  /** The message's kind (its session's kind is the address's `kind`). */
  messageKind?: MessageKind;
  data?: Record<string, unknown>;
  runId?: string;
  /** Whose words the turn is, when they are a person's. */
  person?: string;
}

export type NewMessage = SessionAddress & NewEntry;

/** A row of sessions as both engines read it (their integers, BIGINT included, come as numbers). */
interface SessionRow {
  key: string;
  channel: string;
  account: string;
  kind: SessionKind;
  peer: string;
  peer_name: string | null;
  created_at: number;
  updated_at: number;
  message_count: number;
}

/** A row of session_messages; role and kind are null on messages from before they were kept. */
interface MessageRow {
  id: number;
  session_key: string;
  direction: 'in' | 'out';
  sender: string;
  sender_name: string | null;
  text: string;
  at: number;
  via: string | null;
  role: MessageRole | null;
  kind: MessageKind | null;
  data: string | null;
  run_id: string | null;
  person: string | null;
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

const toSession = (row: SessionRow): Session => ({
  key: row.key, channel: row.channel, account: row.account, kind: row.kind, peer: row.peer, peerName: row.peer_name,
  createdAt: row.created_at, updatedAt: row.updated_at, messageCount: row.message_count,
});

const toMessage = (row: MessageRow): SessionMessage => ({
  id: row.id, sessionKey: row.session_key, direction: row.direction, sender: row.sender, senderName: row.sender_name, text: row.text,
  at: row.at, via: row.via, role: row.role ?? (row.direction === 'in' ? 'user' : 'assistant'), kind: row.kind ?? 'message',
  data: row.data === null ? null : JSON.parse(row.data) as Record<string, unknown>, runId: row.run_id, person: row.person,
});

export const sessionView = (session: Session, last?: SessionMessage): SessionView => ({
  key: session.key, channel: session.channel, account: session.account, kind: session.kind, peer: session.peer,
  peerName: session.peerName, createdAt: iso(session.createdAt), updatedAt: iso(session.updatedAt), messageCount: session.messageCount,
  ...(last ? { lastMessage: messageView(last) } : {}),
});

export const messageView = (message: SessionMessage): MessageView => ({
  id: message.id, direction: message.direction, sender: message.sender, senderName: message.senderName, text: message.text,
  at: iso(message.at), ...(message.via ? { via: message.via } : {}),
  role: message.role, kind: message.kind, ...(message.data ? { data: message.data } : {}), ...(message.runId ? { runId: message.runId } : {}),
});

const INSERT_MESSAGE = 'INSERT INTO session_messages (session_key, direction, sender, sender_name, text, at, via, role, kind, data, run_id, person) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING *';

/**
 * The sessions a person may recall: each room they spoke in (its history is
 * shared by those in it), and each direct conversation they spoke in that no
 * one else spoke in (two people in one direct session, through a shared
 * session name, recall it neither of them).
 */
const RECALLABLE = `SELECT mine.session_key FROM (SELECT DISTINCT session_key FROM session_messages WHERE person = ?) mine
  JOIN sessions s ON s.key = mine.session_key
  WHERE s.kind = 'group' OR NOT EXISTS (SELECT 1 FROM session_messages other WHERE other.session_key = mine.session_key AND other.person <> ?)`;

/** Whose memory a search or a read is in: the sessions someone took part in (`via`, such as agent:<id>), and, unless shared, those a person may recall. */
export interface Recall {
  via: string;
  /** Absent: every session `via` took part in. */
  person?: string;
}

/** Conversations with their history, in the profile's database. */
export class SessionStore {
  private readonly store: Store;

  constructor(store: Store) {
    this.store = store;
  }

  /** The key of the session at an address. */
  keyOf(address: SessionAddress): string {
    return sessionKey(address.channel, address.account, address.kind, address.peer, address.agent);
  }

  /** Appends a message to its session, creating the session on its first message; both in one transaction. */
  record(message: NewMessage, db: Db = this.store): Promise<{ session: Session; message: SessionMessage }> {
    const key = this.keyOf(message);
    return db.transaction(async (tx) => {
      await tx.run(`
        INSERT INTO sessions (key, channel, account, kind, peer, peer_name, created_at, updated_at, message_count)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0)
        ON CONFLICT (key) DO UPDATE SET peer_name = COALESCE(excluded.peer_name, sessions.peer_name)
      `, key, message.channel, message.account, message.kind, message.peer, message.peerName ?? null, message.at, message.at);
      return this.insert(tx, key, message);
    });
  }

  /** Makes the session at an address if it does not exist yet; returns its key. */
  async ensure(address: SessionAddress, at = Date.now(), db: Db = this.store): Promise<string> {
    const key = this.keyOf(address);
    await db.run(`INSERT INTO sessions (key, channel, account, kind, peer, peer_name, created_at, updated_at, message_count)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0) ON CONFLICT (key) DO NOTHING`, key, address.channel, address.account, address.kind, address.peer, address.peerName ?? null, at, at);
    return key;
  }

  /** Appends a message to a session that exists (a step of a run); undefined when there is no such session. */
  append(key: string, entry: NewEntry, db: Db = this.store): Promise<{ session: Session; message: SessionMessage } | undefined> {
    return db.transaction(async (tx) => ((await this.get(key, tx)) ? this.insert(tx, key, entry) : undefined));
  }

  private async insert(tx: Db, key: string, entry: NewEntry): Promise<{ session: Session; message: SessionMessage }> {
    await tx.run('UPDATE sessions SET updated_at = ?, message_count = message_count + 1 WHERE key = ?', entry.at, key);
    const row = await tx.get<MessageRow>(INSERT_MESSAGE, key, entry.direction, entry.sender, entry.senderName ?? null, entry.text, entry.at, entry.via ?? null,
      entry.role ?? null, entry.messageKind ?? null, entry.data === undefined ? null : JSON.stringify(entry.data), entry.runId ?? null, entry.person ?? null);
    return { session: (await this.get(key, tx))!, message: toMessage(row!) };
  }

  async get(key: string, db: Db = this.store): Promise<Session | undefined> {
    const row = await db.get<SessionRow>('SELECT * FROM sessions WHERE key = ?', key);
    return row ? toSession(row) : undefined;
  }

  /** Sessions, most recently active first. */
  /** Sessions, most recent first: of a channel, only those `via` (an agent) took part in, and only those a person may recall, when named. */
  async list(options: { channel?: string; limit: number; via?: string; person?: string }): Promise<Session[]> {
    const where: string[] = [];
    const params: string[] = [];
    if (options.channel !== undefined) {
      where.push('channel = ?');
      params.push(options.channel);
    }
    if (options.via !== undefined) {
      where.push('key IN (SELECT DISTINCT session_key FROM session_messages WHERE via = ?)');
      params.push(options.via);
    }
    if (options.person !== undefined) {
      where.push(`key IN (${RECALLABLE})`);
      params.push(options.person, options.person);
    }
    const rows = await this.store.all<SessionRow>(`SELECT * FROM sessions${where.length ? ` WHERE ${where.join(' AND ')}` : ''} ORDER BY updated_at DESC, key LIMIT ?`, ...params, options.limit);
    return rows.map(toSession);
  }

  /** The last `limit` messages of a session before message id `before` (all when absent), oldest first. */
  async history(key: string, options: { limit: number; before?: number }): Promise<SessionMessage[]> {
    const rows = await this.store.all<MessageRow>('SELECT * FROM session_messages WHERE session_key = ? AND id < ? ORDER BY id DESC LIMIT ?',
      key, options.before ?? Number.MAX_SAFE_INTEGER, options.limit);
    return rows.reverse().map(toMessage);
  }

  /**
   * Inbound messages of a channel account (a reaction's target): the one of
   * this id, or the latest whose data holds this text. Each with its
   * session's peer and its data.
   */
  async inbound(channel: string, account: string, by: { id: number } | { containing: string }): Promise<{ id: number; sessionKey: string; peer: string; data: Record<string, unknown> }[]> {
    const select = `SELECT m.id, m.session_key, s.peer, m.data FROM session_messages m JOIN sessions s ON s.key = m.session_key
      WHERE s.channel = ? AND s.account = ? AND m.direction = 'in'`;
    const rows = 'id' in by
      ? await this.store.all<{ id: number; session_key: string; peer: string; data: string | null }>(`${select} AND m.id = ?`, channel, account, by.id)
      : await this.store.all<{ id: number; session_key: string; peer: string; data: string | null }>(`${select} AND m.data LIKE ? ESCAPE '\\' ORDER BY m.id DESC LIMIT 100`,
        channel, account, `%${by.containing.replace(/[\\%_]/g, (c) => `\\${c}`)}%`);
    return rows.map((row) => {
      let data: Record<string, unknown> = {};
      try {
        data = row.data ? JSON.parse(String(row.data)) as Record<string, unknown> : {};
      } catch {
        // not data a message of a channel keeps
      }
      return { id: Number(row.id), sessionKey: String(row.session_key), peer: String(row.peer), data };
    });
  }

  /** Marks a session to act (a hook's wake action); undefined when there is no such session. */
  async wake(key: string, at = Date.now()): Promise<Session | undefined> {
    const { changes } = await this.store.run('UPDATE sessions SET wake_requested_at = ? WHERE key = ?', at, key);
    return changes === 1 ? this.get(key) : undefined;
  }

  async lastMessage(key: string): Promise<SessionMessage | undefined> {
    return (await this.history(key, { limit: 1 }))[0];
  }

  /**
   * Messages of the sessions in a memory (see Recall) whose text holds every
   * word of a query, best first (FTS5's bm25 on SQLite, ts_rank on
   * PostgreSQL), each with an excerpt around what matched. The query's words
   * are words, never operators of either engine's syntax.
   */
  async search(query: string, recall: Recall, limit: number): Promise<(SessionMessage & { excerpt: string })[]> {
    const words = searchWords(query);
    if (words.length === 0) return [];
    const scope = recall.person === undefined ? [recall.via] : [recall.via, recall.person, recall.person];
    const theirs = `SELECT DISTINCT session_key FROM session_messages WHERE via = ?${recall.person === undefined ? '' : ` AND session_key IN (${RECALLABLE})`}`;
    const match = this.store.dialect.fullText({ table: 'session_messages', alias: 'm', column: 'text', index: 'session_messages_fts', words });
    const rows = await this.store.all<MessageRow & { excerpt: string }>(`SELECT m.*, ${match.excerpt} AS excerpt
      FROM ${match.from}
      WHERE ${match.where} AND m.session_key IN (${theirs})
      ORDER BY ${match.rank}, m.id DESC LIMIT ?`, match.param, ...scope, limit);
    return rows.map((row) => ({ ...toMessage(row), excerpt: row.excerpt }));
  }

  /** The latest summary of a session's earlier messages, if it has one. */
  async latestSummary(key: string): Promise<SessionMessage | undefined> {
    const row = await this.store.get<MessageRow>("SELECT * FROM session_messages WHERE session_key = ? AND kind = 'summary' ORDER BY id DESC LIMIT 1", key);
    return row ? toMessage(row) : undefined;
  }

  /** How many messages of a session come after one. */
  async countAfter(key: string, id: number): Promise<number> {
    return (await this.store.get<{ count: number }>('SELECT COUNT(*) AS count FROM session_messages WHERE session_key = ? AND id > ?', key, id))?.count ?? 0;
  }

  /** The messages of a session after one, oldest first. */
  async after(key: string, id: number, limit: number): Promise<SessionMessage[]> {
    return (await this.store.all<MessageRow>('SELECT * FROM session_messages WHERE session_key = ? AND id > ? ORDER BY id LIMIT ?', key, id, limit)).map(toMessage);
  }

  /** Whether someone took part in a session (a message of theirs is in it). */
  async tookPart(key: string, via: string): Promise<boolean> {
    return (await this.store.get('SELECT 1 AS found FROM session_messages WHERE via = ? AND session_key = ? LIMIT 1', via, key)) !== undefined;
  }

  /** Whether a session is in a memory (see Recall). */
  async recalls(key: string, recall: Recall): Promise<boolean> {
    if (!(await this.tookPart(key, recall.via))) return false;
    if (recall.person === undefined) return true;
    return (await this.store.get(`SELECT 1 AS found FROM sessions s WHERE s.key = ?
      AND EXISTS (SELECT 1 FROM session_messages mine WHERE mine.session_key = s.key AND mine.person = ?)
      AND (s.kind = 'group' OR NOT EXISTS (SELECT 1 FROM session_messages other WHERE other.session_key = s.key AND other.person <> ?))`, key, recall.person, recall.person)) !== undefined;
  }

  /** Replaces a message's facts in its session (a voice note's transcript, written once it is heard). */
  async setData(key: string, id: number, data: Record<string, unknown>, db: Db = this.store): Promise<void> {
    await db.run('UPDATE session_messages SET data = ? WHERE id = ? AND session_key = ?', JSON.stringify(data), id, key);
  }

  /** One message by id, with the session it is in. */
  async message(id: number): Promise<SessionMessage | undefined> {
    const row = await this.store.get<MessageRow>('SELECT * FROM session_messages WHERE id = ?', id);
    return row ? toMessage(row) : undefined;
  }
}

/** The words of a search query: letters and digits, at most 16 of them, each at most 64 long. */
export function searchWords(query: string): string[] {
  return (query.normalize('NFKC').match(/[\p{L}\p{N}_]+/gu) ?? []).filter((word) => word.length <= 64).slice(0, 16);
}
