/**
 * What the inbox remembers of each channel account's platform: the inbound
 * messages it has stored, by the platform's own ids (a redelivery is known
 * and dropped), and where the account left off (an offset, a cursor, a sync
 * token), written only once what it covers is stored. Its tables were made
 * with the outbox's (OUTBOX_MIGRATIONS).
 */
import type { Db, Store } from '../store/database.ts';
import { pruneRows } from '../store/retention.ts';

export class InboundMarks {
  private readonly store: Store;
  private readonly now: () => number;

  constructor(options: { store: Store; now?: () => number }) {
    this.store = options.store;
    this.now = options.now ?? Date.now;
  }

  /** Notes an inbound message by the platform's own id; false when it was seen already (a redelivery). */
  async firstSight(channel: string, account: string, platformId: string, db: Db = this.store): Promise<boolean> {
    const { changes } = await db.run('INSERT INTO channel_inbound_seen (channel, account, platform_id, seen_at) VALUES (?, ?, ?, ?) ON CONFLICT (channel, account, platform_id) DO NOTHING',
      channel, account, platformId, this.now());
    return changes === 1;
  }

  /** Whether an inbound message was stored already (without taking note of it). */
  async seen(channel: string, account: string, platformId: string): Promise<boolean> {
    return (await this.store.get('SELECT 1 AS found FROM channel_inbound_seen WHERE channel = ? AND account = ? AND platform_id = ?', channel, account, platformId)) !== undefined;
  }

  /** Where a channel account left off with its platform (see ChannelContext.cursor). */
  async cursor(channel: string, account: string): Promise<string | undefined> {
    const row = await this.store.get<{ cursor: string }>('SELECT cursor FROM channel_cursors WHERE channel = ? AND account = ?', channel, account);
    return row ? String(row.cursor) : undefined;
  }

  async setCursor(channel: string, account: string, cursor: string | undefined): Promise<void> {
    if (cursor === undefined) await this.store.run('DELETE FROM channel_cursors WHERE channel = ? AND account = ?', channel, account);
    else {
      await this.store.run(`INSERT INTO channel_cursors (channel, account, cursor, updated_at) VALUES (?, ?, ?, ?)
        ON CONFLICT (channel, account) DO UPDATE SET cursor = excluded.cursor, updated_at = excluded.updated_at`, channel, account, cursor, this.now());
    }
  }

  /** Forgets the ids of messages seen longer ago than the store's retention (a platform redelivers within minutes). */
  prune(retentionMs: number): Promise<number> {
    return pruneRows(this.store, 'channel_inbound_seen', 'channel, account, platform_id', 'seen_at < ?', this.now() - retentionMs);
  }
}
