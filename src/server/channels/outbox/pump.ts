/**
 * Delivery: one pump per channel this daemon runs, sending its due replies in
 * order (one recipient's never overtaking each other), each part of a split
 * reply written down as it goes, and what fails tried again after the
 * platform's own wait or with backoff, until it is given up.
 */
import type { Logger } from 'pino';
import type { OutboxEntryView } from '../../../shared/protocol/results.ts';
import { ChannelSendError, type Channel, type ChannelButton, type OutboundFile, type OutboundVoice, type SendReceipt } from '../../kernel/channel.ts';
import { observe, observed, type ChannelMessageObserved } from '../../kernel/observe.ts';
import type { Store } from '../../store/database.ts';
import { FIRST_OF_RECIPIENT, toView, type Row } from './tables.ts';

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
  /** Tries of a reaction before it is given up (late, it says nothing). */
  reactionAttempts: 4,
} as const;

/** The wait before the next try after `attempts` failed ones: a second, doubled each time, five minutes at most. */
export const backoff = (attempts: number) => Math.min(OUTBOX_LIMITS.backoffBaseMs * 2 ** (attempts - 1), OUTBOX_LIMITS.backoffMaxMs);

/** A reply's voice note as a channel sends it, named for its audio (answer.ogg, answer.aac). */
function voiceOf(data: Uint8Array, type: unknown): OutboundVoice {
  const mimeType = typeof type === 'string' && type ? type : 'audio/ogg';
  return { data, mimeType, name: `answer.${mimeType === 'audio/aac' ? 'aac' : mimeType === 'audio/mp4' ? 'm4a' : 'ogg'}` };
}

/** One channel's sender: looks for due replies when woken, when a wait ends, and every pollMs. */
export class Pump {
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
    const kind = row.kind ? String(row.kind) : undefined;
    // A file's caption goes with it, whole (the platform's sendFile says what it does with a long one); a reply spoken back
    // is its text's parts, then its voice note (where the channel sends them).
    const voice = !kind && row.voice instanceof Uint8Array && row.voice.length > 0 && this.channel.sendVoice ? row.voice : undefined;
    const parts: (string | Uint8Array)[] = kind ? [text] : [...(this.channel.split?.(text) ?? [text]), ...(voice ? [voice] : [])];
    const receipts: string[] = row.receipts ? JSON.parse(String(row.receipts)) as string[] : [];
    let sent = Number(row.parts_sent);
    const attempts = Number(row.attempts) + 1;
    const buttons = row.buttons ? JSON.parse(String(row.buttons)) as ChannelButton[] : undefined;
    const lastText = parts.findLastIndex((part) => typeof part === 'string');
    try {
      if (kind) {
        const receipt = await this.special(kind, row);
        if (receipt?.ids) receipts.push(...receipt.ids);
        sent = 1;
      }
      for (; sent < parts.length; sent++) {
        // A streamed reply's first part replaces what was streamed into its message; buttons go under its last text.
        const editOf = sent === 0 && row.edit_of ? String(row.edit_of) : undefined;
        const part = parts[sent]!;
        const options = { idempotencyKey: `gw${id}p${sent}`, ...(editOf ? { editOf } : {}), ...(buttons && sent === lastText ? { buttons } : {}) };
        const receipt = typeof part === 'string'
          ? await this.channel.send(String(row.account), String(row.recipient), part, options)
          : await this.channel.sendVoice!(String(row.account), String(row.recipient), voiceOf(part, row.voice_type), options);
        if (receipt?.ids) receipts.push(...receipt.ids);
        // Each part is written down as it goes: a retry resumes after it.
        if (sent + 1 < parts.length) await this.store.run('UPDATE channel_outbox SET parts_sent = ?, receipts = ? WHERE id = ?', sent + 1, JSON.stringify(receipts), id);
      }
      const sentAt = this.now();
      // A voice note is kept only until it is sent.
      await this.store.run("UPDATE channel_outbox SET status = 'sent', parts_sent = ?, receipts = ?, attempts = ?, sent_at = ?, error = NULL, voice = NULL WHERE id = ?",
        parts.length, JSON.stringify(receipts), attempts, sentAt, id);
      if (kind === 'file') await this.store.run('DELETE FROM channel_outbox_files WHERE outbox_id = ?', id);
      this.attempted(toView({ ...row, status: 'sent', parts_sent: parts.length, receipts: JSON.stringify(receipts), attempts, sent_at: sentAt, error: null }));
      observe(observed.channelMessage, (): ChannelMessageObserved => ({ channel: this.channel.id, direction: 'out' }));
      return true;
    } catch (thrown) {
      const error = thrown instanceof ChannelSendError ? thrown : undefined;
      const message = thrown instanceof Error ? thrown.message : String(thrown);
      const now = this.now();
      const giveUp = error?.permanent === true || attempts >= (kind === 'reaction' ? OUTBOX_LIMITS.reactionAttempts : OUTBOX_LIMITS.maxAttempts)
        || now - Number(row.created_at) >= OUTBOX_LIMITS.maxAgeMs;
      if (error?.retryAfterMs !== undefined) this.pausedUntil.set(String(row.account), now + error.retryAfterMs);
      const nextAt = now + (error?.retryAfterMs ?? backoff(attempts));
      await this.store.run(`UPDATE channel_outbox SET status = ?, attempts = ?, parts_sent = ?, receipts = ?, next_at = ?, error = ?${giveUp ? ', voice = NULL' : ''} WHERE id = ?`,
        giveUp ? 'failed' : 'pending', attempts, sent, JSON.stringify(receipts), nextAt, message, id);
      this.attempted(toView({ ...row, status: giveUp ? 'failed' : 'pending', attempts, parts_sent: sent, receipts: JSON.stringify(receipts), next_at: nextAt, error: message }));
      if (giveUp && kind === 'file') await this.store.run('DELETE FROM channel_outbox_files WHERE outbox_id = ?', id);
      if (giveUp) this.logger.warn({ reply: id, to: String(row.recipient), attempts, error: message }, 'a reply could not be delivered; given up');
      else this.logger.info({ reply: id, attempts, retryInMs: nextAt - now, error: message }, 'a reply could not be delivered yet; retrying');
      return giveUp;
    }
  }

  /** A reaction or a file: handed to the channel's react or sendFile, or refused for good where it has none. */
  private async special(kind: string, row: Row): Promise<SendReceipt | void> {
    const account = String(row.account);
    const to = String(row.recipient);
    if (kind === 'reaction') {
      if (!this.channel.react) throw new ChannelSendError(`${this.channel.id} has no reactions`, { permanent: true });
      await this.channel.react(account, to, String(row.reference), String(row.text));
      return;
    }
    if (kind !== 'file') throw new ChannelSendError(`unknown outbox entry kind ${kind}`, { permanent: true });
    if (!this.channel.sendFile) throw new ChannelSendError(`${this.channel.id} cannot send files`, { permanent: true });
    const stored = await this.store.get<Row>('SELECT name, mime_type, data FROM channel_outbox_files WHERE outbox_id = ?', Number(row.id));
    if (!stored) throw new ChannelSendError('the file to send is no longer in the outbox', { permanent: true });
    const data = stored.data as unknown;
    const file: OutboundFile = { name: String(stored.name), mimeType: String(stored.mime_type), data: data instanceof Uint8Array ? data : new Uint8Array(data as ArrayBuffer) };
    return this.channel.sendFile(account, to, file, String(row.text), { idempotencyKey: `gw${Number(row.id)}f` });
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
