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
 */
import type { Logger } from 'pino';
import type { OutboxEntryView } from '../../../shared/protocol/results.ts';
import { ChannelSendError, type Channel } from '../../kernel/channel.ts';
import { inTransaction, type Db, type Store } from '../../store/database.ts';
import type { Migration } from '../../store/migrations.ts';
import { pruneRows } from '../../store/retention.ts';
import { observe, observed, type ChannelMessageObserved } from '../../kernel/observe.ts';

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
}];

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
}

export const OUTBOX_LIMITS = {
  /** Tries before a reply is given up, and the longest it is tried for. */
  maxAttempts: 12,
  maxAgeMs: 24 * 60 * 60_000,
  backoffBaseMs: 1000,
  backoffMaxMs: 5 * 60_000,
  /** How often a daemon running a channel looks for replies other daemons queued (a shared store without its event). */
  pollMs: 2000,
  /** Replies taken per look. */
  batch: 50,
} as const;

type Row = Record<string, string | number | bigint | null>;

const toView = (row: Row): OutboxEntryView => ({
  id: Number(row.id), channel: String(row.channel), account: String(row.account), to: String(row.recipient),
  status: String(row.status) as OutboxEntryView['status'], attempts: Number(row.attempts),
  ...(row.run_id ? { runId: String(row.run_id) } : {}),
  createdAt: new Date(Number(row.created_at)).toISOString(),
  sentAt: row.sent_at === null ? null : new Date(Number(row.sent_at)).toISOString(),
  nextAttemptAt: row.status === 'pending' ? new Date(Number(row.next_at)).toISOString() : null,
  receipts: row.receipts ? JSON.parse(String(row.receipts)) as string[] : [],
  ...(row.error ? { error: String(row.error) } : {}),
});

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
    const now = this.now();
    const row = await db.get<{ id: number | bigint }>(`INSERT INTO channel_outbox (channel, account, recipient, text, dedupe_key, session_key, run_id, turn_id, edit_of, status, next_at, created_at)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?) ON CONFLICT (dedupe_key) DO NOTHING RETURNING id`,
    item.channel, item.account, item.to, item.text, item.key ?? null, item.sessionKey ?? null, item.runId ?? null, item.turnId ?? null, item.editOf ?? null, now, now);
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

  /** Whether a reply to this message of the session is queued (or sent) already. */
  async answered(sessionKey: string, turnId: number): Promise<boolean> {
    return (await this.store.get('SELECT 1 AS found FROM channel_outbox WHERE session_key = ? AND turn_id = ? LIMIT 1', sessionKey, turnId)) !== undefined;
  }

  async prune(retentionMs: number): Promise<number> {
    const before = this.now() - retentionMs;
    return pruneRows(this.store, 'channel_outbox', 'id', "status <> 'pending' AND created_at < ?", before);
  }
}

/** A reply no earlier reply to the same recipient waits before. */
const FIRST_OF_RECIPIENT = `NOT EXISTS (SELECT 1 FROM channel_outbox e WHERE e.channel = o.channel AND e.account = o.account AND e.recipient = o.recipient
  AND e.status = 'pending' AND e.id < o.id)`;

const backoff = (attempts: number) => Math.min(OUTBOX_LIMITS.backoffBaseMs * 2 ** (attempts - 1), OUTBOX_LIMITS.backoffMaxMs);

/** One channel's sender: looks for due replies when woken, when a wait ends, and every pollMs. */
class Pump {
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private again = false;
  private stopped = false;
  /** The platform asked the whole account to wait (a 429 with retry_after) until then. */
  private readonly pausedUntil = new Map<string, number>();
  private readonly channel: Channel;
  private readonly store: Store;
  private readonly logger: Logger;
  private readonly now: () => number;
  private readonly attempted: (view: OutboxEntryView) => void;

  constructor(channel: Channel, store: Store, logger: Logger, now: () => number, attempted: (view: OutboxEntryView) => void) {
    this.channel = channel;
    this.store = store;
    this.logger = logger;
    this.now = now;
    this.attempted = attempted;
  }

  start(): void {
    this.wake();
  }

  wake(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    clearTimeout(this.timer);
    this.running = this.pass().catch((error: unknown) => {
      this.logger.warn({ err: error }, 'the outbox could not be read; trying again');
    }).finally(() => {
      this.running = undefined;
      if (this.stopped) return;
      if (this.again) {
        this.again = false;
        this.wake();
      } else {
        void this.schedule();
      }
    });
  }

  /** Sleeps until the next reply that may go is due (its recipient's first, its account not asked to wait), or pollMs. */
  private async schedule(): Promise<void> {
    const rows = await this.store.all<Row>(`SELECT account, MIN(next_at) AS next FROM channel_outbox o WHERE channel = ? AND status = 'pending' AND ${FIRST_OF_RECIPIENT}
      GROUP BY account`, this.channel.id).catch(() => [] as Row[]);
    if (this.stopped || this.running) return;
    let next = Infinity;
    for (const row of rows) next = Math.min(next, Math.max(Number(row.next), this.pausedUntil.get(String(row.account)) ?? 0));
    const delay = Math.max(0, Math.min(next - this.now(), OUTBOX_LIMITS.pollMs));
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.wake(), delay);
    this.timer.unref();
  }

  /** Sends every due reply whose recipient has no earlier one waiting. */
  private async pass(): Promise<void> {
    for (;;) {
      const now = this.now();
      const rows = await this.store.all<Row>(`SELECT * FROM channel_outbox o WHERE channel = ? AND status = 'pending' AND next_at <= ? AND ${FIRST_OF_RECIPIENT}
        ORDER BY id LIMIT ?`, this.channel.id, now, OUTBOX_LIMITS.batch);
      if (rows.length === 0 || this.stopped) return;
      let progressed = false;
      for (const row of rows) {
        if (this.stopped) return;
        if ((this.pausedUntil.get(String(row.account)) ?? 0) > this.now()) continue;
        if (await this.send(row)) progressed = true;
      }
      // A reply that left the queue may have been holding up the next one to its recipient: look again.
      if (!progressed) return;
    }
  }

  /** Sends one reply's remaining parts; true when it left the queue (sent or given up). */
  private async send(row: Row): Promise<boolean> {
    const id = Number(row.id);
    const text = String(row.text);
    const parts = this.channel.split?.(text) ?? [text];
    const receipts: string[] = row.receipts ? JSON.parse(String(row.receipts)) as string[] : [];
    let sent = Number(row.parts_sent);
    const attempts = Number(row.attempts) + 1;
    try {
      for (; sent < parts.length; sent++) {
        // A streamed reply's first part replaces what was streamed into its message.
        const editOf = sent === 0 && row.edit_of ? String(row.edit_of) : undefined;
        const receipt = await this.channel.send(String(row.account), String(row.recipient), parts[sent]!, { idempotencyKey: `gw${id}p${sent}`, ...(editOf ? { editOf } : {}) });
        if (receipt?.ids) receipts.push(...receipt.ids);
        // Each part is written down as it goes: a retry resumes after it.
        if (sent + 1 < parts.length) await this.store.run('UPDATE channel_outbox SET parts_sent = ?, receipts = ? WHERE id = ?', sent + 1, JSON.stringify(receipts), id);
      }
      const sentAt = this.now();
      await this.store.run("UPDATE channel_outbox SET status = 'sent', parts_sent = ?, receipts = ?, attempts = ?, sent_at = ?, error = NULL WHERE id = ?",
        parts.length, JSON.stringify(receipts), attempts, sentAt, id);
      this.attempted(toView({ ...row, status: 'sent', parts_sent: parts.length, receipts: JSON.stringify(receipts), attempts, sent_at: sentAt, error: null }));
      observe(observed.channelMessage, (): ChannelMessageObserved => ({ channel: this.channel.id, direction: 'out' }));
      return true;
    } catch (thrown) {
      const error = thrown instanceof ChannelSendError ? thrown : undefined;
      const message = thrown instanceof Error ? thrown.message : String(thrown);
      const now = this.now();
      const giveUp = error?.permanent === true || attempts >= OUTBOX_LIMITS.maxAttempts || now - Number(row.created_at) >= OUTBOX_LIMITS.maxAgeMs;
      if (error?.retryAfterMs !== undefined) this.pausedUntil.set(String(row.account), now + error.retryAfterMs);
      const nextAt = now + (error?.retryAfterMs ?? backoff(attempts));
      await this.store.run('UPDATE channel_outbox SET status = ?, attempts = ?, parts_sent = ?, receipts = ?, next_at = ?, error = ? WHERE id = ?',
        giveUp ? 'failed' : 'pending', attempts, sent, JSON.stringify(receipts), nextAt, message, id);
      this.attempted(toView({ ...row, status: giveUp ? 'failed' : 'pending', attempts, parts_sent: sent, receipts: JSON.stringify(receipts), next_at: nextAt, error: message }));
      if (giveUp) this.logger.warn({ reply: id, to: String(row.recipient), attempts, error: message }, 'a reply could not be delivered; given up');
      else this.logger.info({ reply: id, attempts, retryInMs: nextAt - now, error: message }, 'a reply could not be delivered yet; retrying');
      return giveUp;
    }
  }

  async idle(): Promise<void> {
    while (this.running) await this.running;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }
}
