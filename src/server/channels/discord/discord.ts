/**
 * Discord over its Gateway (a WebSocket, `ws`) and REST API (fetch), typed by
 * discord-api-types: lighter than discord.js for what a gateway needs (see
 * docs/channels.md for the measurement). A message is stored before the
 * session's sequence number moves past it, and that number is kept in the
 * profile's database: a dropped connection, or a daemon that restarts within
 * Discord's resume window, RESUMEs the session and Discord replays what it
 * missed; what was stored already is known by its message id.
 */
import { GatewayCloseCodes, GatewayDispatchEvents, GatewayIntentBits, GatewayOpcodes } from 'discord-api-types/v10';
import type { APIMessage, APIUser, GatewayReceivePayload, GatewayReadyDispatchData } from 'discord-api-types/v10';
import type { ChannelState } from '../../../shared/channels.ts';
import { ChannelSendError, type Channel, type ChannelContext, type ChannelSettings, type InboundAttachment, type InboundMessage, type SendOptions, type SendReceipt } from '../../kernel/channel.ts';
import { splitMessage } from '../formatting.ts';
import { readLimited } from '../attachments.ts';
import { AccountChannel, AccountConnection } from '../account-channel.ts';
import { accountsOf, settingPath } from '../accounts.ts';
import { FIRST_RETRY_MS } from '../reconnect.ts';

/** Discord's longest message. */
export const DISCORD_LIMIT = 2000;
const MAX_INBOUND_CHARS = 16_384;
const INTENTS = GatewayIntentBits.Guilds | GatewayIntentBits.GuildMessages | GatewayIntentBits.DirectMessages | GatewayIntentBits.MessageContent;

interface AccountSettings { enabled: boolean; apiRoot?: string; rooms: string[] }

export function discordAccounts(settings: ChannelSettings): Map<string, AccountSettings> {
  return accountsOf<AccountSettings>(settings, { keys: ['apiRoot', 'rooms'], inherited: { apiRoot: true }, defaults: { rooms: [] } });
}

const secretFor = (channelId: string, account: string) => settingPath(channelId, account, 'botToken');

/** Where a session stands, kept between connections and restarts. */
interface Cursor { sessionId: string; seq: number; resumeUrl: string }

class Refused extends Error {}

/** One bot: its Gateway connection, heartbeats and resumes, and its REST calls. */
class DiscordAccount extends AccountConnection<AccountSettings> {
  private stopped = false;
  private socket?: import('ws').WebSocket;
  private heartbeat?: NodeJS.Timeout;
  private token?: string;
  private me?: APIUser;
  private cursor?: Cursor;
  /** The last sequence received (heartbeats carry it); the cursor's is the last one handled. */
  private received: number | null = null;
  private acked = true;
  /** Dispatches are handled one after another, in the order they came. */
  private handling: Promise<void> = Promise.resolve();
  private readonly dmChannels = new Map<string, string>();


  constructor(channelId: string, name: string, settings: () => AccountSettings | undefined, context: ChannelContext) {
    super(channelId, name, settings, context);
  }

  get selfName(): string | undefined {
    return this.me ? `@${this.me.username}` : undefined;
  }

  private api(path: string): string {
    return `${(this.settings()?.apiRoot ?? 'https://discord.com').replace(/\/+$/, '')}/api/v10${path}`;
  }

  /** A REST call; a refusal comes back as an error with Discord's status, message and retry_after. */
  private async rest<T>(method: string, path: string, body?: unknown): Promise<T> {
    const response = await fetch(this.api(path), {
      method,
      headers: { authorization: `Bot ${this.token}`, 'content-type': 'application/json', 'user-agent': 'DiscordBot (gateway, 1)' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(30_000),
    });
    if (response.status === 204) return undefined as T;
    const payload = await response.json().catch(() => ({})) as { message?: string; code?: number; retry_after?: number };
    if (!response.ok) throw new RestError(response.status, payload.message ?? response.statusText, payload.code, payload.retry_after);
    return payload as T;
  }

  async connect(): Promise<void> {
    if (this.stopped) return;
    this.setState('connecting');
    try {
      this.token = await this.context.secret(secretFor(this.channelId, this.name));
      if (!this.token) throw new Refused(`no bot token: gateway secrets set ${secretFor(this.channelId, this.name)} (the token from the Developer Portal's Bot page, on stdin)`);
      this.cursor ??= await this.loadCursor();
      const gateway = this.cursor?.resumeUrl ?? (await this.rest<{ url: string }>('GET', '/gateway/bot')).url;
      await this.open(gateway);
    } catch (error) {
      this.failed(error);
    }
  }

  private async loadCursor(): Promise<Cursor | undefined> {
    const stored = await this.context.cursor.get(this.name);
    if (!stored) return undefined;
    try {
      const cursor = JSON.parse(stored) as Cursor;
      return typeof cursor.sessionId === 'string' && typeof cursor.seq === 'number' && typeof cursor.resumeUrl === 'string' ? cursor : undefined;
    } catch {
      return undefined;
    }
  }

  private saveCursor(): Promise<void> {
    return this.context.cursor.set(this.name, this.cursor ? JSON.stringify(this.cursor) : undefined);
  }

  /** Waits, then connects again: after the platform's own wait, or with backoff, or (a refused token) the longest wait. */
  private failed(error: unknown, waitMs?: number): void {
    if (this.stopped) return;
    this.close();
    const max = this.reconnect.longest;
    let wait = waitMs ?? this.reconnect.next();
    let state: ChannelState = 'disconnected';
    let detail = error instanceof Error ? error.message : String(error);
    if (error instanceof Refused) {
      state = 'error';
      wait = max;
    } else if (error instanceof RestError) {
      if (error.status === 401) {
        state = 'error';
        wait = max;
        detail = `Discord refused the bot token (${error.message}); set a valid one: gateway secrets set ${secretFor(this.channelId, this.name)}`;
      } else {
        if (error.retryAfterMs !== undefined) wait = error.retryAfterMs;
        detail = `Discord: ${error.message}`;
      }
    } else if (!(error instanceof Error && /^Discord/.test(error.message))) {
      detail = `cannot reach Discord: ${detail}`;
    }
    this.setState(state, detail);
    this.log.warn({ error: detail }, 'discord account not connected; retrying');
    this.reconnect.schedule(() => void this.connect(), wait);
  }

  private close(code = 4000): void {
    clearInterval(this.heartbeat);
    const socket = this.socket;
    this.socket = undefined;
    if (socket) {
      socket.removeAllListeners();
      socket.on('error', () => undefined);
      if (socket.readyState === 1) socket.close(code);
      else socket.terminate();
    }
  }

  private async open(url: string): Promise<void> {
    const { WebSocket } = await import('ws');
    const socket = new WebSocket(`${url.replace(/\/+$/, '')}/?v=10&encoding=json`, { handshakeTimeout: 15_000 });
    this.socket = socket;
    socket.on('message', (data) => {
      let payload: GatewayReceivePayload;
      try {
        payload = JSON.parse(String(data)) as GatewayReceivePayload;
      } catch {
        this.log.warn('a Gateway frame that is not JSON; ignored');
        return;
      }
      this.onPayload(payload);
    });
    socket.on('error', (error) => this.log.debug({ err: error }, 'Gateway socket error'));
    socket.on('close', (code, reason) => {
      if (this.socket !== socket) return;
      this.onClose(code, String(reason));
    });
  }

  private emit(payload: unknown): void {
    if (this.socket?.readyState === 1) this.socket.send(JSON.stringify(payload));
  }

  private onPayload(payload: GatewayReceivePayload): void {
    switch (payload.op) {
      case GatewayOpcodes.Hello: {
        const interval = payload.d.heartbeat_interval;
        clearInterval(this.heartbeat);
        this.acked = true;
        this.heartbeat = setInterval(() => {
          // No ACK since the last beat: the connection is a zombie; resume on a new one.
          if (!this.acked) {
            this.log.info('Discord did not acknowledge a heartbeat; reconnecting');
            this.failed(new Error('Discord stopped answering heartbeats'), 0);
            return;
          }
          this.acked = false;
          this.emit({ op: GatewayOpcodes.Heartbeat, d: this.received });
        }, interval);
        this.heartbeat.unref();
        if (this.cursor) {
          this.emit({ op: GatewayOpcodes.Resume, d: { token: this.token, session_id: this.cursor.sessionId, seq: this.cursor.seq } });
        } else {
          this.emit({ op: GatewayOpcodes.Identify, d: { token: this.token, intents: INTENTS, properties: { os: process.platform, browser: 'gateway', device: 'gateway' } } });
        }
        return;
      }
      case GatewayOpcodes.HeartbeatAck:
        this.acked = true;
        return;
      case GatewayOpcodes.Heartbeat:
        this.emit({ op: GatewayOpcodes.Heartbeat, d: this.received });
        return;
      case GatewayOpcodes.Reconnect:
        this.failed(new Error('Discord asked for a new connection'), 0);
        return;
      case GatewayOpcodes.InvalidSession:
        // Not resumable: the session is forgotten, and a new one identified after a short wait, as Discord asks.
        if (!payload.d) {
          this.cursor = undefined;
          void this.saveCursor();
        }
        this.failed(new Error('Discord ended the session'), 1000 + Math.floor(Math.random() * 4000));
        return;
      case GatewayOpcodes.Dispatch:
        this.received = payload.s;
        this.handling = this.handling.then(() => this.dispatch(payload.t, payload.d, payload.s)).catch((error: unknown) => {
          // Not handled: the session is resumed from before it, and Discord sends it again.
          this.log.warn({ err: error }, 'a Discord event could not be stored; resuming to get it again');
          this.failed(error, FIRST_RETRY_MS);
        });
        return;
      default:
    }
  }

  private async dispatch(type: string, data: unknown, seq: number): Promise<void> {
    if (type === GatewayDispatchEvents.Ready) {
      const ready = data as GatewayReadyDispatchData;
      this.me = ready.user;
      this.cursor = { sessionId: ready.session_id, seq, resumeUrl: ready.resume_gateway_url };
      await this.saveCursor();
      this.reconnect.succeeded();
      this.setState('connected', this.selfName);
      return;
    }
    if (type === GatewayDispatchEvents.Resumed) {
      this.reconnect.succeeded();
      this.setState('connected', this.selfName);
      this.advance(seq, false);
      return;
    }
    if (type === GatewayDispatchEvents.MessageCreate) {
      const message = this.inbound(data as APIMessage);
      if (message) await this.context.inbound(message);
      await this.advance(seq, true);
      return;
    }
    await this.advance(seq, false);
  }

  /** The session has handled everything up to seq: kept now after a message, in memory (kept with the next) otherwise. */
  private async advance(seq: number, keep: boolean): Promise<void> {
    if (!this.cursor || seq <= this.cursor.seq) return;
    this.cursor.seq = seq;
    if (keep) await this.saveCursor();
  }

  private inbound(message: APIMessage): InboundMessage | undefined {
    if (!message || typeof message !== 'object' || typeof message.id !== 'string' || typeof message.channel_id !== 'string') return undefined;
    const author = message.author;
    if (!author || typeof author.id !== 'string' || author.bot || author.id === this.me?.id) return undefined;
    // Default messages and replies: joins, pins, boosts and the like are not a person speaking.
    if (message.type !== 0 && message.type !== 19) return undefined;
    const attachments = this.attachmentsOf(message);
    if (typeof message.content !== 'string' || (!message.content.trim() && attachments.length === 0)) return undefined;
    const text = message.content.length > MAX_INBOUND_CHARS ? message.content.slice(0, MAX_INBOUND_CHARS) : message.content;
    const at = Date.parse(message.timestamp) || Date.now();
    const base = {
      account: this.name, sender: author.id, senderName: author.global_name ?? author.username ?? author.id, text, at, platformId: message.id,
      ...(attachments.length ? { attachments } : {}),
    };
    const guild = (message as { guild_id?: string }).guild_id;
    if (!guild) {
      this.dmChannels.set(author.id, message.channel_id);
      return { ...base, kind: 'direct', replyTo: message.channel_id };
    }
    const rooms = this.settings()?.rooms ?? [];
    if (!rooms.includes('*') && !rooms.includes(message.channel_id)) {
      this.log.debug({ room: message.channel_id }, 'message in a Discord channel the agent may not answer in (channels.<id>.rooms); skipped');
      return undefined;
    }
    const botId = this.me?.id;
    const mentioned = botId !== undefined && (message.mentions?.some((user) => user.id === botId) || text.includes(`<@${botId}>`) || text.includes(`<@!${botId}>`));
    const repliedTo = botId !== undefined && message.referenced_message?.author?.id === botId;
    const prompt = botId ? text.replace(new RegExp(`<@!?${botId}>`, 'g'), '').replace(/\s+/g, ' ').trim() : text;
    return {
      ...base, kind: 'group', room: message.channel_id, replyTo: `${message.channel_id}/${message.id}`,
      ...(mentioned || repliedTo ? { addressed: { text: prompt || text } } : {}),
    };
  }

  /** A message's attachments, fetched from Discord's CDN (or the configured apiRoot's host): no token goes with them. */
  private attachmentsOf(message: APIMessage): InboundAttachment[] {
    if (!Array.isArray(message.attachments)) return [];
    return message.attachments.filter((file) => file && typeof file === 'object' && typeof file.url === 'string').map((file, index) => ({
      name: typeof file.filename === 'string' ? file.filename : `file-${index + 1}`,
      mimeType: typeof file.content_type === 'string' ? file.content_type : undefined,
      size: typeof file.size === 'number' ? file.size : undefined,
      fetch: async (maxBytes, signal) => {
        const url = new URL(file.url);
        if (!this.cdnHost(url)) throw new Error(`files are fetched only from Discord's CDN, not ${url.host}`);
        return readLimited(await globalThis.fetch(url, { signal }), maxBytes);
      },
    }));
  }

  private cdnHost(url: URL): boolean {
    const root = this.settings()?.apiRoot;
    if (root && new URL(root).origin === url.origin) return true;
    return url.protocol === 'https:' && ['cdn.discordapp.com', 'media.discordapp.net'].includes(url.hostname.toLowerCase());
  }

  private onClose(code: number, reason: string): void {
    if (this.stopped) return;
    if (code === GatewayCloseCodes.AuthenticationFailed) {
      this.cursor = undefined;
      void this.saveCursor();
      this.failed(new Refused(`Discord refused the bot token (${reason || 'Authentication failed'}); set a valid one: gateway secrets set ${secretFor(this.channelId, this.name)}`));
      return;
    }
    if (code === GatewayCloseCodes.DisallowedIntents || code === GatewayCloseCodes.InvalidIntents) {
      this.failed(new Refused('Discord refused the intents: turn on the Message Content intent on the Developer Portal\'s Bot page'));
      return;
    }
    if (code === GatewayCloseCodes.InvalidSeq || code === GatewayCloseCodes.SessionTimedOut) {
      this.cursor = undefined;
      void this.saveCursor();
    }
    this.failed(new Error(`Discord closed the connection (${code}${reason ? `: ${reason}` : ''}); resuming`));
  }

  /** The channel a reply goes to: a channel id (with the message it answers), or a person's DM (@<user id>). */
  private async target(to: string): Promise<{ channel: string; reference?: string }> {
    const [address, reference] = to.split('/') as [string, string | undefined];
    // A person who wrote to the bot is reached in their DM by their id alone (a pairing approval's notice).
    const known = this.dmChannels.get(address.replace(/^@/, ''));
    if (known) return { channel: known };
    if (!address.startsWith('@')) return { channel: address, ...(reference ? { reference } : {}) };
    const user = address.slice(1);
    let channel = this.dmChannels.get(user);
    if (!channel) {
      channel = (await this.rest<{ id: string }>('POST', '/users/@me/channels', { recipient_id: user })).id;
      this.dmChannels.set(user, channel);
    }
    return { channel };
  }

  async send(to: string, text: string, options: SendOptions = {}): Promise<SendReceipt> {
    if (!this.token || this.status.state !== 'connected') throw new ChannelSendError(`${this.channelId} account ${this.name} is ${this.status.state}; the message was not sent`);
    try {
      const { channel, reference } = await this.target(to);
      if (options.editOf !== undefined) {
        try {
          const edited = await this.rest<{ id: string }>('PATCH', `/channels/${channel}/messages/${options.editOf}`, { content: text, allowed_mentions: { parse: [] } });
          return { ids: [edited.id] };
        } catch (error) {
          // A message that is gone gets the text as a new one.
          if (!(error instanceof RestError) || error.status !== 404) throw error;
        }
      }
      // A nonce Discord enforces: a retry of a message it took already is not posted twice.
      const nonce = options.idempotencyKey ? options.idempotencyKey.slice(0, 25) : undefined;
      const sent = await this.rest<{ id: string }>('POST', `/channels/${channel}/messages`, {
        content: text, allowed_mentions: { parse: [] },
        ...(reference ? { message_reference: { message_id: reference, fail_if_not_exists: false } } : {}),
        ...(nonce ? { nonce, enforce_nonce: true } : {}),
      });
      return { ids: [sent.id] };
    } catch (error) {
      if (error instanceof RestError) {
        if (error.retryAfterMs !== undefined) throw new ChannelSendError(`Discord: ${error.message}`, { retryAfterMs: error.retryAfterMs });
        // No such channel, no access, a message Discord will never take: trying again cannot help.
        throw new ChannelSendError(`Discord: ${error.message}`, { permanent: error.status === 400 || error.status === 403 || error.status === 404 });
      }
      throw new ChannelSendError(`cannot reach Discord: ${(error as Error)?.message ?? String(error)}`);
    }
  }

  async typing(to: string): Promise<void> {
    if (!this.token || this.status.state !== 'connected') return;
    const { channel } = await this.target(to);
    await this.rest('POST', `/channels/${channel}/typing`);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.reconnect.stop();
    // Closed with a code that keeps the session resumable, for the next start.
    this.close(4000);
    await this.handling.catch(() => undefined);
    this.setState('disconnected');
  }
}

class RestError extends Error {
  readonly status: number;
  readonly code?: number;
  readonly retryAfterMs?: number;

  constructor(status: number, message: string, code?: number, retryAfterSeconds?: number) {
    super(message);
    this.status = status;
    this.code = code;
    this.retryAfterMs = status === 429 && retryAfterSeconds !== undefined ? Math.ceil(retryAfterSeconds * 1000) : undefined;
  }
}

export class DiscordChannel extends AccountChannel<DiscordAccount, AccountSettings> implements Channel {
  protected accountsOf(settings: ChannelSettings): Map<string, AccountSettings> {
    return discordAccounts(settings);
  }

  protected open(name: string, settings: () => AccountSettings | undefined): DiscordAccount {
    const account = new DiscordAccount(this.id, name, settings, this.context);
    void account.connect();
    return account;
  }

  readonly edits = true;

  split(text: string): string[] {
    return splitMessage(text, DISCORD_LIMIT);
  }

  normalizePeer(peer: string): string {
    return peer.trim().replace(/^<@!?(\d+)>$/, '@$1');
  }

  /** A channel id is a room; a person is @<user id> (their DM). */
  isRoom(peer: string): boolean {
    return /^\d{17,20}(\/\d{17,20})?$/.test(peer.trim());
  }

  checkPeer(peer: string): string | undefined {
    return /^@?\d{17,20}(\/\d{17,20})?$/.test(peer.trim()) ? undefined : 'is not a Discord channel id or @<user id>';
  }
}
