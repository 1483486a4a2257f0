/**
 * What the outbox keeps in the profile's database: its table of replies (and,
 * made with it, the inbox's marks of what each platform delivered and where
 * each account left off), how a row reads as the protocol shows it, and the
 * rule that keeps one recipient's replies in order.
 */
import type { OutboxEntryView } from '../../../shared/protocol/results.ts';
import type { Migration } from '../../store/migrations.ts';

export const OUTBOX_MIGRATIONS: readonly Migration[] = [{
  version: 2,
  name: 'the outbox of replies and the inbound messages seen',
  sql: `
    CREATE TABLE channel_outbox (
      id INTEGER PRIMARY KEY,
      channel TEXT NOT NULL,
      account TEXT NOT NULL,
      recipient TEXT NOT NULL,
      text TEXT NOT NULL,
      dedupe_key TEXT UNIQUE,
      session_key TEXT,
      run_id TEXT,
      turn_id BIGINT,
      status TEXT NOT NULL,
      attempts INTEGER NOT NULL DEFAULT 0,
      parts_sent INTEGER NOT NULL DEFAULT 0,
      receipts TEXT,
      next_at BIGINT NOT NULL,
      created_at BIGINT NOT NULL,
      sent_at BIGINT,
      error TEXT
    );
    CREATE INDEX channel_outbox_due ON channel_outbox (channel, status, next_at);
    CREATE INDEX channel_outbox_recipient ON channel_outbox (channel, account, recipient, status, id);
    CREATE INDEX channel_outbox_session ON channel_outbox (session_key, turn_id);
    CREATE TABLE channel_inbound_seen (
      channel TEXT NOT NULL,
      account TEXT NOT NULL,
      platform_id TEXT NOT NULL,
      seen_at BIGINT NOT NULL,
      PRIMARY KEY (channel, account, platform_id)
    );
    CREATE INDEX channel_inbound_seen_at ON channel_inbound_seen (seen_at);
  `,
}, {
  version: 3,
  name: 'where each channel account left off with its platform',
  sql: `
    CREATE TABLE channel_cursors (
      channel TEXT NOT NULL,
      account TEXT NOT NULL,
      cursor TEXT NOT NULL,
      updated_at BIGINT NOT NULL,
      PRIMARY KEY (channel, account)
    );
  `,
}, {
  version: 5,
  name: 'a streamed reply ends in the message it was streamed into',
  sql: 'ALTER TABLE channel_outbox ADD COLUMN edit_of TEXT;',
}, {
  version: 6,
  name: 'a reply spoken back keeps its voice note until it is sent',
  sql: `
    ALTER TABLE channel_outbox ADD COLUMN voice BLOB;
    ALTER TABLE channel_outbox ADD COLUMN voice_type TEXT;
  `,
}, {
  version: 7,
  name: 'reactions and files in the outbox',
  sql: `
    ALTER TABLE channel_outbox ADD COLUMN kind TEXT;
    ALTER TABLE channel_outbox ADD COLUMN reference TEXT;
    CREATE TABLE channel_outbox_files (
      outbox_id BIGINT PRIMARY KEY,
      name TEXT NOT NULL,
      mime_type TEXT NOT NULL,
      data BLOB NOT NULL
    );
  `,
}, {
  version: 8,
  name: 'buttons under a message (an approval request, an agent\'s question)',
  sql: 'ALTER TABLE channel_outbox ADD COLUMN buttons TEXT;',
}];

/** A row of channel_outbox as the store returns it. */
export type Row = Record<string, string | number | bigint | null | Uint8Array>;

/** A row as the protocol shows it (outbox list, a session's reply, an operator's send). */
export const toView = (row: Row): OutboxEntryView => ({
  id: Number(row.id), channel: String(row.channel), account: String(row.account), to: String(row.recipient),
  ...(row.kind ? { kind: String(row.kind) as 'reaction' | 'file' } : {}),
  status: String(row.status) as OutboxEntryView['status'], attempts: Number(row.attempts),
  ...(row.run_id ? { runId: String(row.run_id) } : {}),
  createdAt: new Date(Number(row.created_at)).toISOString(),
  sentAt: row.sent_at === null ? null : new Date(Number(row.sent_at)).toISOString(),
  nextAttemptAt: row.status === 'pending' ? new Date(Number(row.next_at)).toISOString() : null,
  receipts: row.receipts ? JSON.parse(String(row.receipts)) as string[] : [],
  ...(row.error ? { error: String(row.error) } : {}),
  ...(row.voice_type ? { voice: true as const } : {}),
});

/** A reply no earlier reply to the same recipient waits before (a reaction holds up nothing). */
export const FIRST_OF_RECIPIENT = `NOT EXISTS (SELECT 1 FROM channel_outbox e WHERE e.channel = o.channel AND e.account = o.account AND e.recipient = o.recipient
  AND e.status = 'pending' AND e.id < o.id AND COALESCE(e.kind, 'text') <> 'reaction')`;
