import { sessionKey, type SessionKind } from '../../shared/channels.ts';
import type { Store } from '../store/database.ts';

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

export interface SessionMessage {
  id: number;
  sessionKey: string;
  direction: 'in' | 'out';
  sender: string;
  senderName: string | null;
  text: string;
  at: number;
  /** Who sent an outbound message (an operator's device id), when known. */
  via: string | null;
}

export interface NewMessage {
  channel: string;
  account: string;
  kind: SessionKind;
  peer: string;
  peerName?: string;
  direction: 'in' | 'out';
  sender: string;
  senderName?: string;
  text: string;
  at: number;
  via?: string;
}

type Row = Record<string, string | number | bigint | null>;
const str = (value: unknown): string | null => (value === null || value === undefined ? null : String(value));

const toSession = (row: Row): Session => ({
  key: String(row.key), channel: String(row.channel), account: String(row.account), kind: String(row.kind) as SessionKind,
  peer: String(row.peer), peerName: str(row.peer_name), createdAt: Number(row.created_at), updatedAt: Number(row.updated_at),
  messageCount: Number(row.message_count),
});

const toMessage = (row: Row): SessionMessage => ({
  id: Number(row.id), sessionKey: String(row.session_key), direction: String(row.direction) as 'in' | 'out', sender: String(row.sender),
  senderName: str(row.sender_name), text: String(row.text), at: Number(row.at), via: str(row.via),
});

/** Conversations with their history: one per channel, account and peer, or per room. */
export class SessionStore {
  private readonly store: Store;

  constructor(store: Store) {
    this.store = store;
  }

  /** Appends a message to its session, creating the session on its first message; both in one transaction. */
  record(message: NewMessage): { session: Session; message: SessionMessage } {
    const key = sessionKey(message.channel, message.account, message.kind, message.peer);
    return this.store.transaction(() => {
      this.store.prepare(`
        INSERT INTO sessions (key, channel, account, kind, peer, peer_name, created_at, updated_at, message_count)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1)
        ON CONFLICT (key) DO UPDATE SET updated_at = excluded.updated_at, message_count = sessions.message_count + 1,
          peer_name = COALESCE(excluded.peer_name, sessions.peer_name)
      `).run(key, message.channel, message.account, message.kind, message.peer, message.peerName ?? null, message.at, message.at);
      const inserted = this.store.prepare(
        'INSERT INTO session_messages (session_key, direction, sender, sender_name, text, at, via) VALUES (?, ?, ?, ?, ?, ?, ?)',
      ).run(key, message.direction, message.sender, message.senderName ?? null, message.text, message.at, message.via ?? null);
      const row = this.store.prepare('SELECT * FROM session_messages WHERE id = ?').get(inserted.lastInsertRowid) as Row;
      return { session: this.get(key)!, message: toMessage(row) };
    });
  }

  get(key: string): Session | undefined {
    const row = this.store.prepare('SELECT * FROM sessions WHERE key = ?').get(key) as Row | undefined;
    return row ? toSession(row) : undefined;
  }

  /** Sessions, most recently active first. */
  list(options: { channel?: string; limit: number }): Session[] {
    const rows = options.channel === undefined
      ? this.store.prepare('SELECT * FROM sessions ORDER BY updated_at DESC, key LIMIT ?').all(options.limit)
      : this.store.prepare('SELECT * FROM sessions WHERE channel = ? ORDER BY updated_at DESC, key LIMIT ?').all(options.channel, options.limit);
    return (rows as Row[]).map(toSession);
  }

  /** The last `limit` messages of a session before message id `before` (all when absent), oldest first. */
  history(key: string, options: { limit: number; before?: number }): SessionMessage[] {
    const rows = this.store.prepare(
      'SELECT * FROM session_messages WHERE session_key = ? AND id < ? ORDER BY id DESC LIMIT ?',
    ).all(key, options.before ?? Number.MAX_SAFE_INTEGER, options.limit) as Row[];
    return rows.reverse().map(toMessage);
  }

  /** Marks a session to act (a hook's wake action); undefined when there is no such session. */
  wake(key: string, at = Date.now()): Session | undefined {
    const changed = this.store.prepare('UPDATE sessions SET wake_requested_at = ? WHERE key = ?').run(at, key).changes;
    return Number(changed) === 1 ? this.get(key) : undefined;
  }

  lastMessage(key: string): SessionMessage | undefined {
    return this.history(key, { limit: 1 })[0];
  }
}
