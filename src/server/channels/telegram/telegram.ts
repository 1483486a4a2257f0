/**
 * Telegram through grammY's Bot API client: long polling, each update stored
 * before Telegram is told it arrived (the next getUpdates' offset), replies
 * in Telegram's HTML, split at its 4,096 characters, and a typing indicator
 * while an agent works. Several bots (accounts) per channel. How an update
 * is read (a person's message and its files) is in inbound.ts.
 */
import type { Update, UserFromGetMe } from 'grammy/types';
import type { Api as GrammyApi, GrammyError as GrammyErrorType } from 'grammy';
import type { ChannelState } from '../../../shared/channels.ts';
import { ChannelSendError, type Channel, type ChannelContext, type ChannelSettings, type ChannelRequest, type ChannelResponse, type InboundMessage, type OutboundFile, type OutboundVoice, type SendOptions, type SendReceipt } from '../../kernel/channel.ts';
import { readLimited } from '../attachments.ts';
import { AccountChannel, AccountConnection } from '../account-channel.ts';
import { accountsOf, settingPath } from '../accounts.ts';
import { FIRST_RETRY_MS } from '../reconnect.ts';
import { deliveredJson, refusal, secretTokenRefusal, storeThenAcknowledge } from '../webhook.ts';
import { markdownToTelegramHtml, plainText, splitMessage } from '../formatting.ts';
import { describeNetworkError } from '../network-errors.ts';
import { channelFetch } from '../http-fetch.ts';
import { inboundOf } from './inbound.ts';
import { answerQuery, inlineKeyboard } from './buttons.ts';

/** Telegram's longest message. */
export const TELEGRAM_LIMIT = 4096;
const POLL_SECONDS = 25;
/** Where Telegram presents the secret token a webhook was set with. */
export const TELEGRAM_SECRET_HEADER = 'X-Telegram-Bot-Api-Secret-Token';

interface AccountSettings {
  enabled: boolean;
  apiRoot?: string;
  /** Webhook mode: Telegram posts updates to this address (this daemon's /channels/<id>/<account>/webhook). */
  webhookUrl?: string;
  /** Group chat ids the agent may answer in ("*": any group the bot is in). */
  rooms: string[];
}

/** The accounts of a Telegram channel's settings: the top level (the bot whose token is channels.<id>.botToken) and each of `accounts`. */
export function telegramAccounts(settings: ChannelSettings): Map<string, AccountSettings> {
  return accountsOf<AccountSettings>(settings, { keys: ['apiRoot', 'webhookUrl', 'rooms'], inherited: { apiRoot: true }, defaults: { rooms: [] } });
}

const secretFor = (channelId: string, account: string, name: 'botToken' | 'webhookSecret' = 'botToken') => settingPath(channelId, account, name);

type Grammy = typeof import('grammy');

/**
 * grammY, loaded when a Telegram channel starts: its web build, one module
 * on the runtime's own fetch, rather than its Node build, which brings
 * node-fetch 2, its URL and punycode modules and an AbortController shim
 * (and Node's deprecation warning for punycode).
 */
async function loadGrammy(): Promise<Grammy> {
  return await import('grammy/web') as unknown as Grammy;
}

/** One bot: polls for updates until stopped, reconnecting with backoff. */
class TelegramAccount extends AccountConnection<AccountSettings> {
  private stopped = false;
  private polling?: Promise<void>;
  private abort = new AbortController();
  private me?: UserFromGetMe;
  private api?: GrammyApi;
  /** The bot's token, for file downloads (never logged: it is in their address). */
  private token?: string;
  /** In webhook mode, the secret Telegram sends with each update (X-Telegram-Bot-Api-Secret-Token). */
  private webhookSecret?: string;
  private offset?: number;

  private readonly grammy: Grammy;

  constructor(channelId: string, name: string, settings: () => AccountSettings | undefined, context: ChannelContext, grammy: Grammy) {
    super(channelId, name, settings, context);
    this.grammy = grammy;
  }

  /** The account's abort signal, as grammY's Node build types it (its own AbortSignal shim). */
  private get signal(): never {
    return this.abort.signal as never;
  }

  get selfName(): string | undefined {
    return this.me?.username ? `@${this.me.username}` : undefined;
  }

  start(): void {
    // Nothing an account meets may stop the daemon: its loop logs what it did not expect, and goes on.
    this.polling = this.run().catch((error: unknown) => this.log.error({ err: error }, 'telegram account stopped unexpectedly'));
  }

  /** Connects (getMe), then polls (or, in webhook mode, waits for Telegram's posts); any failure waits with backoff and starts again. */
  private async run(): Promise<void> {
    while (!this.stopped) {
      try {
        await this.connect();
        this.reconnect.succeeded();
        if (this.webhookSecret !== undefined) await this.reconnect.wait(2 ** 31 - 1);
        else await this.poll();
      } catch (error) {
        if (this.stopped) return;
        let outcome: ReturnType<TelegramAccount['classify']>;
        try {
          outcome = this.classify(error);
        } catch {
          outcome = { state: 'disconnected', detail: (error as Error)?.message ?? String(error), waitMs: FIRST_RETRY_MS * 10 };
        }
        this.setState(outcome.state, outcome.detail);
        this.log.warn({ error: outcome.detail }, 'telegram account not connected; retrying');
        await this.reconnect.wait(outcome.waitMs);
      }
    }
  }

  private async connect(): Promise<void> {
    this.setState('connecting');
    const token = await this.context.secret(secretFor(this.channelId, this.name));
    if (!token) throw new Setup(`no bot token: gateway secrets set ${secretFor(this.channelId, this.name)} (the token BotFather gave, on stdin)`);
    const settings = this.settings();
    this.token = token;
    this.api = new this.grammy.Api(token, { apiRoot: settings?.apiRoot, timeoutSeconds: POLL_SECONDS + 35, fetch: channelFetch as never });
    this.me = await this.api.getMe(this.signal);
    const webhookUrl = settings?.webhookUrl;
    if (webhookUrl) {
      const secretName = secretFor(this.channelId, this.name, 'webhookSecret');
      const secret = await this.context.secret(secretName);
      if (!secret || !/^[A-Za-z0-9_-]{1,256}$/.test(secret)) {
        throw new Setup(`webhook mode needs a secret Telegram sends with each update (1-256 of A-Z a-z 0-9 _ -): openssl rand -hex 32 | gateway secrets set ${secretName}`);
      }
      // Telegram keeps an update and posts it again until this daemon answers 2xx, which it does once the update is stored.
      await this.api.setWebhook(webhookUrl, { secret_token: secret, allowed_updates: ['message', 'callback_query'], drop_pending_updates: false }, this.signal);
      this.webhookSecret = secret;
      this.setState('connected', `@${this.me.username} (webhook)`);
      return;
    }
    this.webhookSecret = undefined;
    // Long polling and a webhook exclude each other: a webhook left set would make every getUpdates fail.
    await this.api.deleteWebhook({ drop_pending_updates: false }, this.signal);
    this.setState('connected', `@${this.me.username}`);
  }

  /**
   * Polls for updates. Telegram keeps an update until a later getUpdates asks
   * for an offset past it: the offset moves on only once each update is
   * stored, so a daemon that stops loses none (it gets them again, and drops
   * those it had stored already).
   */
  private async poll(): Promise<void> {
    const api = this.api!;
    while (!this.stopped) {
      const updates = await api.getUpdates({ offset: this.offset, timeout: POLL_SECONDS, allowed_updates: ['message', 'callback_query'] }, this.signal);
      if (this.status.state !== 'connected') this.setState('connected', `@${this.me!.username}`);
      for (const update of updates) {
        if (this.stopped) return;
        if (update.callback_query) await answerQuery(update.callback_query, this.name, this.context, this.api, this.log); // a button pressed, acted on first
        const message = this.inbound(update);
        // A message that cannot be stored now stops the batch; the next getUpdates brings it (and the rest) again.
        if (message) await this.context.inbound(message);
        this.offset = update.update_id + 1;
      }
    }
  }

  /** An update as the gateway takes it (inbound.ts), read with what the account knows now. */
  private inbound(update: Update): InboundMessage | undefined {
    return inboundOf(update, {
      account: this.name, me: this.me, rooms: this.settings()?.rooms ?? [], log: this.log,
      maxAttachmentBytes: Number(this.context.settings().maxAttachmentBytes ?? 10 * 1024 * 1024),
      download: (fileId, maxBytes, signal) => this.download(fileId, maxBytes, signal),
    });
  }

  /** A file's bytes, through getFile and the Bot API's file address (the token is in it: never logged). */
  private async download(fileId: string, maxBytes: number, signal: AbortSignal): Promise<Uint8Array> {
    const api = this.api;
    if (!api || !this.token) throw new Error('the bot is not connected');
    const info = await api.getFile(fileId, signal as never);
    if (!info.file_path) throw new Error('Telegram gave no file path');
    if (info.file_size !== undefined && info.file_size > maxBytes) throw new Error(`it is ${info.file_size} bytes`);
    const root = (this.settings()?.apiRoot ?? 'https://api.telegram.org').replace(/\/+$/, '');
    const response = await globalThis.fetch(`${root}/file/bot${this.token}/${info.file_path}`, { signal });
    return readLimited(response, maxBytes);
  }

  /** What a failure means for the account: its state, what to tell, how long to wait. */
  private classify(error: unknown): { state: ChannelState; detail: string; waitMs: number } {
    const backoff = this.reconnect.next();
    const max = this.reconnect.longest;
    if (error instanceof Setup) return { state: 'error', detail: error.message, waitMs: max };
    if (error instanceof this.grammy.GrammyError) {
      const grammyError = error as GrammyErrorType;
      if (grammyError.error_code === 401 || grammyError.error_code === 404) {
        return { state: 'error', detail: `Telegram refused the bot token (${grammyError.description}); set a valid one: gateway secrets set ${secretFor(this.channelId, this.name)}`, waitMs: max };
      }
      if (grammyError.error_code === 409) return { state: 'error', detail: `Telegram: ${grammyError.description}`, waitMs: backoff };
      const retryAfter = grammyError.parameters?.retry_after;
      if (retryAfter !== undefined) return { state: 'disconnected', detail: `Telegram asked to wait ${retryAfter} s`, waitMs: retryAfter * 1000 };
      return { state: 'disconnected', detail: `Telegram: ${grammyError.description}`, waitMs: backoff };
    }
    return { state: 'disconnected', detail: `cannot reach Telegram: ${this.unreachable(error)}`, waitMs: backoff };
  }

  /** A request Telegram posted (webhook mode): with the secret token the webhook was set with, checked before receive(). */
  verify(request: ChannelRequest): ChannelResponse | undefined {
    return secretTokenRefusal(request, TELEGRAM_SECRET_HEADER, this.status.state === 'connected' ? this.webhookSecret : undefined, 'This bot is not in webhook mode, or not connected yet.');
  }

  /** An update Telegram posted, verified: stored, and only then answered 200. */
  async receive(request: ChannelRequest): Promise<ChannelResponse> {
    const read = deliveredJson(request.body);
    if (read.refused) return read.refused;
    const update = read.value as Update | null;
    if (!update || typeof update !== 'object' || typeof update.update_id !== 'number') return refusal(400, 'bad_request', 'The body is not a Telegram update.');
    // A button pressed is acted on first; one that cannot be now is left for Telegram to post again.
    if (update.callback_query && !(await answerQuery(update.callback_query, this.name, this.context, this.api, this.log).then(() => true, (error: unknown) => void this.log.warn({ err: error }, 'a button press could not be handled')))) return refusal(503, 'unavailable', 'The button press could not be handled now.');
    return storeThenAcknowledge(this.context, this.inbound(update), this.log, 'a Telegram update');
  }

  /** The connected API, or a send error the outbox tries again. */
  private get connected(): GrammyApi {
    if (!this.api || this.status.state !== 'connected') throw new ChannelSendError(`${this.channelId} account ${this.name} is ${this.status.state}; the message was not sent`);
    return this.api;
  }

  async react(to: string, reference: string, emoji: string): Promise<void> {
    const api = this.connected;
    const { chat } = topicOf(to);
    await api.setMessageReaction(chat, Number(reference), [{ type: 'emoji', emoji: emoji as never }]).catch((error: unknown) => {
      throw this.sendError(error);
    });
  }

  /** A file: an image Telegram shows as a photo (sendPhoto, up to 10 MB), anything else as a document; a caption past Telegram's 1,024 characters follows as a message. */
  async sendFile(to: string, file: OutboundFile, caption: string): Promise<SendReceipt> {
    const api = this.connected;
    const { chat, thread } = topicOf(to);
    const fits = caption.length <= 1024;
    const options = { ...(thread ? { message_thread_id: thread } : {}), ...(caption && fits ? { caption: plainText(caption) } : {}) };
    const input = new this.grammy.InputFile(file.data, file.name);
    const photo = /^image\/(jpeg|png|webp)$/.test(file.mimeType) && file.data.length <= 10 * 1024 * 1024;
    try {
      const sent = photo ? await api.sendPhoto(chat, input, options) : await api.sendDocument(chat, input, options);
      const ids = [String(sent.message_id)];
      if (caption.trim() && !fits) ids.push(...(await this.send(to, caption)).ids);
      return { ids };
    } catch (error) {
      throw error instanceof ChannelSendError ? error : this.sendError(error);
    }
  }

  async send(to: string, text: string, { editOf, buttons }: SendOptions = {}): Promise<SendReceipt> {
    const api = this.connected;
    const { chat, thread } = topicOf(to);
    const post = async (body: string, html: boolean): Promise<SendReceipt> => {
      // An edit without a keyboard takes the message's buttons away.
      const options = { ...(html ? { parse_mode: 'HTML' as const } : {}), link_preview_options: { is_disabled: true }, ...(thread ? { message_thread_id: thread } : {}), ...(buttons?.length ? { reply_markup: inlineKeyboard(buttons) } : {}) };
      if (editOf !== undefined) {
        try {
          await api.editMessageText(chat, Number(editOf), body, options);
          return { ids: [editOf] };
        } catch (error) {
          if (!(error instanceof this.grammy.GrammyError)) throw error;
          const { description } = error as GrammyErrorType;
          // The same text again is no change; a message that is gone gets the text as a new one.
          if (/message is not modified/i.test(description)) return { ids: [editOf] };
          if (!/message to edit not found|message can't be edited/i.test(description)) throw error;
        }
      }
      const sent = await api.sendMessage(chat, body, options);
      return { ids: [String(sent.message_id)] };
    };
    try {
      return await post(markdownToTelegramHtml(text), true);
    } catch (error) {
      // Formatting Telegram will not parse: the text goes as it is.
      if (error instanceof this.grammy.GrammyError && (error as GrammyErrorType).error_code === 400 && /can't parse entities/i.test((error as GrammyErrorType).description)) {
        try {
          return await post(plainText(text), false);
        } catch (again) {
          throw this.sendError(again);
        }
      }
      throw this.sendError(error);
    }
  }

  /** A voice note, as Telegram's own (sendVoice: OGG/Opus shows as a voice message with its waveform). */
  async sendVoice(to: string, voice: OutboundVoice): Promise<SendReceipt> {
    const api = this.api;
    if (!api || this.status.state !== 'connected') throw new ChannelSendError(`${this.channelId} account ${this.name} is ${this.status.state}; the voice note was not sent`);
    try {
      const sent = await api.sendVoice(to, new this.grammy.InputFile(voice.data, voice.name));
      return { ids: [String(sent.message_id)] };
    } catch (error) {
      throw this.sendError(error);
    }
  }

  /** A refused send as the outbox reads it: when to try again, or not at all. */
  private sendError(error: unknown): ChannelSendError {
    if (error instanceof this.grammy.GrammyError) {
      const { error_code: code, description, parameters } = error as GrammyErrorType;
      if (parameters?.retry_after !== undefined) return new ChannelSendError(`Telegram: ${description}`, { retryAfterMs: parameters.retry_after * 1000 });
      // No such chat, the bot blocked or removed, a message Telegram will never take: trying again cannot help.
      if (code === 400 || code === 403) return new ChannelSendError(`Telegram: ${description}`, { permanent: true });
      return new ChannelSendError(`Telegram: ${description}`);
    }
    return new ChannelSendError(`cannot reach Telegram: ${this.unreachable(error)}`);
  }

  /**
   * Why the Bot API could not be reached (grammY's HttpError names the method; what failed underneath is the
   * reason), with its host and port: never the URL, which carries the token.
   */
  private unreachable(error: unknown): string {
    return describeNetworkError(error, this.settings()?.apiRoot ?? 'https://api.telegram.org');
  }

  async typing(to: string): Promise<void> {
    const { chat, thread } = topicOf(to);
    await this.api?.sendChatAction(chat, 'typing', thread ? { message_thread_id: thread } : {}).catch(() => undefined);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.abort.abort();
    this.reconnect.stop();
    await this.polling?.catch(() => undefined);
    this.setState('disconnected');
  }
}

/** A chat and, for a forum topic's conversation ("<chat>/<topic>"), its topic. */
function topicOf(to: string): { chat: string; thread?: number } {
  const [chat, thread] = to.split('/') as [string, string | undefined];
  return { chat, ...(thread && /^\d+$/.test(thread) ? { thread: Number(thread) } : {}) };
}

/** A set-up problem (no token): the account waits for an operator. */
class Setup extends Error {}

export class TelegramChannel extends AccountChannel<TelegramAccount, AccountSettings> implements Channel {
  private grammy?: Grammy;

  protected accountsOf(settings: ChannelSettings): Map<string, AccountSettings> {
    return telegramAccounts(settings);
  }

  protected open(name: string, settings: () => AccountSettings | undefined): TelegramAccount {
    const account = new TelegramAccount(this.id, name, settings, this.context, this.grammy!);
    account.start();
    return account;
  }

  override async start(): Promise<void> {
    this.grammy = await loadGrammy();
    await super.start();
  }

  readonly edits = true;
  readonly buttons = true;
  /** The Bot API takes uploads of up to 50 MB. */
  readonly fileLimit = 50 * 1024 * 1024;

  react(account: string, to: string, reference: string, emoji: string): Promise<void> {
    return this.running(account).react(to, reference, emoji);
  }

  sendFile(account: string, to: string, file: OutboundFile, caption: string): Promise<SendReceipt> {
    return this.running(account).sendFile(to, file, caption);
  }

  receive(request: ChannelRequest): Promise<ChannelResponse> {
    return this.handOver(request);
  }

  split(text: string): string[] {
    return splitMessage(text, TELEGRAM_LIMIT);
  }

  sendVoice(account: string, to: string, voice: OutboundVoice): Promise<SendReceipt | void> {
    return this.voiceThrough(account, to, voice);
  }

  /** Chat ids are numbers; a public channel or group may go by @name. */
  normalizePeer(peer: string): string {
    const trimmed = peer.trim();
    return trimmed.startsWith('@') ? trimmed.toLowerCase() : trimmed;
  }

  /** Group chats have negative ids; a forum topic is "<chat>/<topic>". */
  isRoom(peer: string): boolean {
    return /^-\d+(\/\d+)?$/.test(peer.trim());
  }

  checkPeer(peer: string): string | undefined {
    return /^-?\d{1,20}(\/\d{1,10})?$/.test(peer.trim()) || /^@[A-Za-z][A-Za-z0-9_]{3,31}$/.test(peer.trim()) ? undefined : 'is not a Telegram chat id (a number, with /<topic> for a forum topic) or @name';
  }
}
