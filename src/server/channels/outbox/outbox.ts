/**
 * The outbox: replies on their way to a channel, kept in the profile's
 * database from the moment they exist (in the transaction that records what
 * they answer) until the platform has taken them. The daemon running a
 * channel sends its due replies in order, one recipient's after another's
 * never overtaking, and retries what fails: after the platform's own
 * `retry_after` when it gives one, else with backoff, for a day at most. A
 * reply split into several messages resumes after the parts already sent.
 * What a platform answered (its message ids) is kept with the reply.
 *
 * At least once: a daemon that stops after the platform took a message and
 * before it wrote that down sends that message again on its next start.
 *
 * Here: queuing, who waits on a first attempt, the pumps of the channels this
 * daemon runs, what the outbox holds and its retention. The table is in
 * tables.ts, the sending and its backoff in pump.ts.
 */
import type { Logger } from 'pino';
import type { OutboxEntryView } from '../../../shared/protocol/results.ts';
import type { Channel, ChannelButton, OutboundFile } from '../../kernel/channel.ts';
import { inTransaction, type Db, type Store } from '../../store/database.ts';
import { pruneRows } from '../../store/retention.ts';
import type { HistoryDecorator } from '../../sessions/module.ts';
import { Pump } from './pump.ts';
import { toView, type Row } from './tables.ts';

export { OUTBOX_LIMITS } from './pump.ts';
export { OUTBOX_MIGRATIONS } from './tables.ts';

/** A reply to send. */
export interface OutboxItem {
  channel: string;
  account: string;
  /** The recipient as the channel takes it (a nick, a room, a chat id). */
  to: string;
  text: string;
  /** Sent at most once per key (an agent run's answer: `run:<id>`); a second reply under a key already queued is dropped. */
  key?: string;
  sessionKey?: string;
  runId?: string;
  /** The message of the session this replies to (its id there). */
  turnId?: number;
  /** The platform's id of a message of the account's showing the reply as it streamed: its first part goes there. */
  editOf?: string;
  /** Buttons under its last part, where the platform has them; with editOf, [] takes an edited message's buttons away. */
  buttons?: ChannelButton[];
  /** The reply spoken (OGG/Opus), sent as the platform's voice note after its text; kept here until it is sent. */
  voice?: { data: Uint8Array; mimeType: string };
  /**
   * A reaction (text is its emoji) on the message `reference` names
   * (InboundMessage.reference), or a file (text is its caption), its bytes
   * kept with the row until it is sent; a text message when left out.
   */
  kind?: 'reaction' | 'file';
  reference?: string;
  file?: OutboundFile;
}

/** The replies that wait, and the pumps of the channels this daemon runs. */
export class Outbox {
  private readonly store: Store;
  private readonly logger: Logger;
  private readonly pumps = new Map<string, Pump>();
  /** Who waits on a message's first attempt, by its id. */
  private readonly attempts = new Map<number, Set<(view: OutboxEntryView) => void>>();
  private readonly now: () => number;
  /** Told after a commit that queued replies for a channel (another daemon may run it). */
  private readonly announce: (channel: string) => void;

  constructor(options: { store: Store; logger: Logger; now?: () => number; announce?: (channel: string) => void }) {
    this.store = options.store;
    this.logger = options.logger;
    this.now = options.now ?? Date.now;
    this.announce = options.announce ?? (() => undefined);
  }

  /** Queues a reply in the caller's transaction (or on its own); false when its key was queued already. */
  async enqueue(item: OutboxItem, db: Db = this.store): Promise<boolean> {
    return (await this.queue(item, db)) !== undefined;
  }

  /** Queues a message as enqueue does, and says its id (undefined when its key was queued already). */
  async queue(item: OutboxItem, db: Db = this.store): Promise<number | undefined> {
    // A file's bytes go in with its row, or neither does.
    if (item.file && !inTransaction(db)) return db.transaction((tx) => this.queue(item, tx));
    const now = this.now();
    const row = await db.get<{ id: number | bigint }>(`INSERT INTO channel_outbox (channel, account, recipient, text, dedupe_key, session_key, run_id, turn_id, edit_of, voice, voice_type, kind, reference, buttons, status, next_at, created_at)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?) ON CONFLICT (dedupe_key) DO NOTHING RETURNING id`,
    item.channel, item.account, item.to, item.text, item.key ?? null, item.sessionKey ?? null, item.runId ?? null, item.turnId ?? null, item.editOf ?? null,
    item.voice ? item.voice.data : null, item.voice?.mimeType ?? null, item.kind ?? (item.file ? 'file' : null), item.reference ?? null,
    item.buttons ? JSON.stringify(item.buttons) : null, now, now);
    if (row && item.file) {
      await db.run('INSERT INTO channel_outbox_files (outbox_id, name, mime_type, data) VALUES (?, ?, ?, ?)', Number(row.id), item.file.name, item.file.mimeType, item.file.data);
    }
    if (row) {
      const wake = () => this.wake(item.channel);
      if (inTransaction(db)) db.afterCommit(wake);
      else wake();
    }
    return row ? Number(row.id) : undefined;
  }

  /**
   * What became of a queued message's first attempt, for a caller that
   * answers someone (an operator's send, a pairing notice): sent, waiting to
   * be tried again (and why), or given up (and why). Told at once by this
   * daemon's pump; a message another daemon sends is looked at in the
   * store. Past `waitMs` without an attempt (its recipient's earlier
   * messages first, the platform asked to wait), it is still queued.
   */
  async firstAttempt(id: number, waitMs: number): Promise<OutboxEntryView> {
    const deadline = this.now() + waitMs;
    let told: OutboxEntryView | undefined;
    const tell = (view: OutboxEntryView) => {
      told = view;
    };
    const listeners = this.attempts.get(id) ?? new Set();
    listeners.add(tell);
    this.attempts.set(id, listeners);
    try {
      for (;;) {
        const row = told ? undefined : await this.store.get<Row>('SELECT * FROM channel_outbox WHERE id = ?', id);
        const view = told ?? (row ? toView(row) : undefined);
        if (!view) throw new Error(`outbox message ${id} is gone`);
        if (view.status !== 'pending' || view.attempts > 0 || this.now() >= deadline) return view;
        await new Promise((resolve) => setTimeout(resolve, Math.min(100, Math.max(0, deadline - this.now()))));
      }
    } finally {
      listeners.delete(tell);
      if (listeners.size === 0) this.attempts.delete(id);
    }
  }

  /** The pump tried a message: whoever waits on it is told. */
  private attempted(view: OutboxEntryView): void {
    for (const tell of this.attempts.get(view.id) ?? []) tell(view);
  }

  /** Sends what waits for this channel, while this daemon runs it. */
  attach(channel: Channel): void {
    this.detach(channel.id);
    const pump = new Pump(channel, this.store, this.logger.child({ channel: channel.id }), this.now, (view) => this.attempted(view));
    this.pumps.set(channel.id, pump);
    pump.start();
  }

  detach(channelId: string): Promise<void> {
    const pump = this.pumps.get(channelId);
    this.pumps.delete(channelId);
    return pump?.stop() ?? Promise.resolve();
  }

  /** A reply was queued for this channel: its pump looks now, here or on the daemon that runs it. */
  wake(channelId: string): void {
    const pump = this.pumps.get(channelId);
    if (pump) pump.wake();
    else this.announce(channelId);
  }

  /**
   * An account connected (again): its replies waiting out a retry go now,
   * not when their backoff ends (a server back after a restart need not wait
   * for the retries the outage made longer).
   */
  async retryNow(channelId: string, account: string): Promise<void> {
    const now = this.now();
    const { changes } = await this.store.run("UPDATE channel_outbox SET next_at = ? WHERE channel = ? AND account = ? AND status = 'pending' AND next_at > ?", now, channelId, account, now);
    if (changes > 0) this.wake(channelId);
  }

  async stop(): Promise<void> {
    await Promise.all([...this.pumps.keys()].map((id) => this.detach(id)));
  }

  /** Resolves once every pump has nothing due left to send now. */
  async idle(): Promise<void> {
    await Promise.all([...this.pumps.values()].map((pump) => pump.idle()));
  }

  async list(filter: { channel?: string; sessionKey?: string; status?: string; limit: number }): Promise<OutboxEntryView[]> {
    const where: string[] = [];
    const params: (string | number)[] = [];
    if (filter.channel) { where.push('channel = ?'); params.push(filter.channel); }
    if (filter.sessionKey) { where.push('session_key = ?'); params.push(filter.sessionKey); }
    if (filter.status) { where.push('status = ?'); params.push(filter.status); }
    const rows = await this.store.all<Row>(`SELECT * FROM channel_outbox ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY id DESC LIMIT ?`, ...params, filter.limit);
    return rows.map(toView);
  }

  /** The replies of a session's runs, by run id, for its history. */
  async ofSession(sessionKey: string): Promise<Map<string, OutboxEntryView>> {
    const rows = await this.store.all<Row>('SELECT * FROM channel_outbox WHERE session_key = ? AND run_id IS NOT NULL', sessionKey);
    return new Map(rows.map((row) => [String(row.run_id), toView(row)]));
  }

  /** Counts of what waits and what was given up, per channel, for status. */
  async counts(): Promise<Map<string, { pending: number; failed: number }>> {
    const rows = await this.store.all<Row>("SELECT channel, status, COUNT(*) AS n FROM channel_outbox WHERE status IN ('pending', 'failed') GROUP BY channel, status");
    const counts = new Map<string, { pending: number; failed: number }>();
    for (const row of rows) {
      const entry = counts.get(String(row.channel)) ?? { pending: 0, failed: 0 };
      entry[String(row.status) as 'pending' | 'failed'] = Number(row.n);
      counts.set(String(row.channel), entry);
    }
    return counts;
  }

  /** The message queued under a key (OutboxItem.key), as the outbox shows it: its status and the platform's ids once sent. */
  async byKey(key: string, db: Db = this.store): Promise<OutboxEntryView | undefined> {
    const row = await db.get<Row>('SELECT * FROM channel_outbox WHERE dedupe_key = ?', key);
    return row ? toView(row) : undefined;
  }

  /** Whether a reply to this message of the session is queued (or sent) already. */
  async answered(sessionKey: string, turnId: number): Promise<boolean> {
    return (await this.store.get('SELECT 1 AS found FROM channel_outbox WHERE session_key = ? AND turn_id = ? LIMIT 1', sessionKey, turnId)) !== undefined;
  }

  async prune(retentionMs: number): Promise<number> {
    const before = this.now() - retentionMs;
    return pruneRows(this.store, 'channel_outbox', 'id', "status <> 'pending' AND created_at < ?", before);
  }
}

/** A run's answer in a session's history says how its reply stands: sent (with the platform's ids), waiting, given up. */
export function replyDeliveries(outbox: Outbox): HistoryDecorator {
  return async (session, messages) => {
    if (!messages.some((message) => message.runId)) return;
    const replies = await outbox.ofSession(session.key);
    const last = new Map<string, (typeof messages)[number]>();
    for (const message of messages) if (message.runId && message.role === 'assistant' && message.kind !== 'tool_call') last.set(message.runId, message);
    for (const [runId, message] of last) {
      const reply = replies.get(runId);
      if (reply) message.delivery = reply;
    }
  };
}
