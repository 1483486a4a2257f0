/**
 * A reply shown as it is written: the streaming previews, the one kind of
 * send that goes to a platform directly (its final text still goes through
 * the outbox, into the same message).
 */
import type { Logger } from 'pino';
import type { Channel } from '../kernel/channel.ts';

/** How often a streamed reply's message is edited, at most (the apps' edit rate limits are about one a second per chat). */
export const STREAM_EDIT_MS = 1000;
/** A streamed reply shows once it has this much text, or after STREAM_FIRST_MS. */
const STREAM_FIRST_CHARS = 40;
const STREAM_FIRST_MS = 500;

/**
 * One reply streamed into one message: sent once there is something to show,
 * then edited as the text grows (never more often than STREAM_EDIT_MS, one
 * request at a time, always the latest text), up to what fits in one message.
 * The final text still goes through the outbox, into the same message
 * (OutboxItem.editOf): a preview that fails only stops the previews.
 */
export class ReplyStream {
  private text = '';
  private shown = '';
  private messageId?: string;
  private startedAt?: number;
  private lastEditAt = 0;
  private inFlight?: Promise<void>;
  private timer?: NodeJS.Timeout;
  private stopped = false;
  private readonly channel: Channel;
  private readonly account: string;
  private readonly to: string;
  private readonly log: Logger;

  constructor(channel: Channel, account: string, to: string, log: Logger) {
    this.channel = channel;
    this.account = account;
    this.to = to;
    this.log = log;
  }

  /** More text of the reply. */
  push(delta: string): void {
    if (this.stopped) return;
    this.text += delta;
    this.startedAt ??= Date.now();
    this.schedule();
  }

  private schedule(): void {
    if (this.timer || this.inFlight || this.stopped) return;
    const now = Date.now();
    const due = this.messageId === undefined
      ? (this.text.trim().length >= STREAM_FIRST_CHARS ? now : this.startedAt! + STREAM_FIRST_MS)
      : this.lastEditAt + STREAM_EDIT_MS;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.flush();
    }, Math.max(0, due - now));
  }

  private flush(): void {
    if (this.stopped || this.inFlight) return;
    // Only what fits in the first message streams; the rest comes with the final reply.
    const parts = this.channel.split?.(this.text) ?? [this.text];
    const text = parts[0] ?? '';
    if (!text.trim() || text === this.shown) return;
    const fits = parts.length === 1;
    this.inFlight = this.channel.send(this.account, this.to, text, this.messageId ? { editOf: this.messageId } : {}).then((receipt) => {
      this.messageId ??= receipt?.ids[0];
      this.shown = text;
      this.lastEditAt = Date.now();
      if (!fits || this.messageId === undefined) this.stopped = true;
    }, (error: unknown) => {
      this.log.info({ error: (error as Error)?.message }, 'a streamed reply could not be shown as it grew; it comes whole');
      this.stopped = true;
    }).finally(() => {
      this.inFlight = undefined;
      if (this.text !== this.shown) this.schedule();
    });
  }

  /** Stops streaming; resolves with the id of the message the reply streamed into (the final text goes there), if any. */
  async finish(): Promise<string | undefined> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    while (this.inFlight) await this.inFlight;
    return this.messageId;
  }
}
