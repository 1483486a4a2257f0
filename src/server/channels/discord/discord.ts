/**
 * Discord over its Gateway (a WebSocket, `ws`) and REST API (fetch), typed by
 * discord-api-types: lighter than discord.js for what a gateway needs (see
 * docs/channels.md for the measurement). A message is stored before the
 * session's sequence number moves past it, and that number is kept in the
 * profile's database: a dropped connection, or a daemon that restarts within
 * Discord's resume window, RESUMEs the session and Discord replays what it
 * missed; what was stored already is known by its message id.
 *
 * Here: the account's Gateway connection (identify or resume, heartbeats,
 * dispatches in order, closes and what they mean) and the channel. Its REST
 * calls and sending are in rest.ts, how a message is read in inbound.ts.
 */
import { GatewayCloseCodes, GatewayDispatchEvents, GatewayIntentBits, GatewayOpcodes } from 'discord-api-types/v10';
import type { APIInteraction, APIMessage, APIUser, GatewayReceivePayload, GatewayReadyDispatchData } from 'discord-api-types/v10';
import type { ChannelState } from '../../../shared/channels.ts';
import { ChannelSendError, type Channel, type ChannelContext, type ChannelSettings, type OutboundFile, type OutboundVoice, type SendOptions, type SendReceipt } from '../../kernel/channel.ts';
import { splitMessage } from '../formatting.ts';
import { AccountChannel, AccountConnection } from '../account-channel.ts';
import { accountsOf, settingPath } from '../accounts.ts';
import { describeNetworkError } from '../network-errors.ts';
import { FIRST_RETRY_MS } from '../reconnect.ts';
import { inboundOf } from './inbound.ts';
import { DiscordRest, RestError } from './rest.ts';
import { interactionAnswer, pressOf } from './buttons.ts';

/** Discord's longest message. */
export const DISCORD_LIMIT = 2000;
const INTENTS = GatewayIntentBits.Guilds | GatewayIntentBits.GuildMessages | GatewayIntentBits.DirectMessages | GatewayIntentBits.MessageContent;

interface AccountSettings { enabled: boolean; apiRoot?: string; rooms: string[] }

export function discordAccounts(settings: ChannelSettings): Map<string, AccountSettings> {
  return accountsOf<AccountSettings>(settings, { keys: ['apiRoot', 'rooms'], inherited: { apiRoot: true }, defaults: { rooms: [] } });
}

const secretFor = (channelId: string, account: string) => settingPath(channelId, account, 'botToken');

/** Where a session stands, kept between connections and restarts. */
interface Cursor { sessionId: string; seq: number; resumeUrl: string }

class Refused extends Error {}

/** One bot: its Gateway connection, heartbeats and resumes; its REST calls through DiscordRest. */
class DiscordAccount extends AccountConnection<AccountSettings> {
  private stopped = false;
  private socket?: import('ws').WebSocket;
  private heartbeat?: NodeJS.Timeout;
  private me?: APIUser;
  private cursor?: Cursor;
  /** The last sequence received (heartbeats carry it); the cursor's is the last one handled. */
  private received: number | null = null;
  private acked = true;
  /** Dispatches are handled one after another, in the order they came. */
  private handling: Promise<void> = Promise.resolve();
  /** Its REST calls and sending. */
  private readonly rest: DiscordRest;

  constructor(channelId: string, name: string, settings: () => AccountSettings | undefined, context: ChannelContext) {
    super(channelId, name, settings, context);
    this.rest = new DiscordRest(() => this.settings()?.apiRoot);
  }

  get selfName(): string | undefined {
    return this.me ? `@${this.me.username}` : undefined;
  }

  async connect(): Promise<void> {
    if (this.stopped) return;
    this.setState('connecting');
    try {
      this.rest.token = await this.context.secret(secretFor(this.channelId, this.name));
      if (!this.rest.token) throw new Refused(`no bot token: gateway secrets set ${secretFor(this.channelId, this.name)} (the token from the Developer Portal's Bot page, on stdin)`);
      this.cursor ??= await this.loadCursor();
      const gateway = this.cursor?.resumeUrl ?? (await this.rest.call<{ url: string }>('GET', '/gateway/bot')).url;
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
      detail = `cannot reach Discord: ${describeNetworkError(error, this.rest.root)}`;
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
    let opened = false;
    let failure: Error | undefined;
    socket.on('open', () => {
      opened = true;
    });
    socket.on('error', (error) => {
      failure = error;
      this.log.debug({ err: error }, 'Gateway socket error');
    });
    socket.on('close', (code, reason) => {
      if (this.socket !== socket) return;
      // Never connected: what stood in the way, and where.
      if (!opened && failure) this.failed(new Error(`Discord's Gateway cannot be reached: ${describeNetworkError(failure, url)}`));
      else this.onClose(code, String(reason));
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
          this.emit({ op: GatewayOpcodes.Resume, d: { token: this.rest.token, session_id: this.cursor.sessionId, seq: this.cursor.seq } });
        } else {
          this.emit({ op: GatewayOpcodes.Identify, d: { token: this.rest.token, intents: INTENTS, properties: { os: process.platform, browser: 'gateway', device: 'gateway' } } });
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
      const rooms = this.settings()?.rooms ?? [];
      const channel = (data as APIMessage).channel_id;
      const inGuild = typeof (data as { guild_id?: unknown }).guild_id === 'string';
      const parent = inGuild && typeof channel === 'string' && !rooms.includes(channel) ? await this.rest.threadParent(channel) : undefined;
      const message = inboundOf(data as APIMessage, {
        account: this.name, me: this.me, rooms, apiRoot: () => this.settings()?.apiRoot, log: this.log,
        direct: (user, dm) => this.rest.noteDm(user, dm), parentOf: (id) => (id === channel ? parent : undefined),
      });
      if (message) await this.context.inbound(message);
      await this.advance(seq, true);
      return;
    }
    if (type === GatewayDispatchEvents.InteractionCreate) {
      const interaction = data as APIInteraction;
      const press = pressOf(interaction, this.name);
      if (press) {
        const answer = await this.context.pressed(press);
        await this.rest.respond(interaction.id, interaction.token, interactionAnswer(answer.text)).catch((error: unknown) => this.log.debug({ err: error }, 'an interaction could not be answered'));
      }
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

  async send(to: string, text: string, options: SendOptions = {}): Promise<SendReceipt> {
    if (!this.rest.token || this.status.state !== 'connected') throw new ChannelSendError(`${this.channelId} account ${this.name} is ${this.status.state}; the message was not sent`);
    return this.rest.send(to, text, options);
  }

  async sendVoice(to: string, voice: OutboundVoice, options: SendOptions = {}): Promise<SendReceipt> {
    if (!this.rest.token || this.status.state !== 'connected') throw new ChannelSendError(`${this.channelId} account ${this.name} is ${this.status.state}; the voice note was not sent`);
    return this.rest.sendVoice(to, voice, options);
  }

  async react(to: string, reference: string, emoji: string): Promise<void> {
    if (!this.rest.token || this.status.state !== 'connected') throw new ChannelSendError(`${this.channelId} account ${this.name} is ${this.status.state}; the reaction was not put`);
    await this.rest.react(to, reference, emoji);
  }

  async sendFile(to: string, file: OutboundFile, caption: string, options: SendOptions = {}): Promise<SendReceipt> {
    if (!this.rest.token || this.status.state !== 'connected') throw new ChannelSendError(`${this.channelId} account ${this.name} is ${this.status.state}; the file was not sent`);
    return this.rest.sendFile(to, file, caption, options);
  }

  async typing(to: string): Promise<void> {
    if (!this.rest.token || this.status.state !== 'connected') return;
    await this.rest.typing(to);
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
  readonly buttons = true;
  /** Discord takes attachments of up to 10 MiB in a server without boosts. */
  readonly fileLimit = 10 * 1024 * 1024;

  react(account: string, to: string, reference: string, emoji: string): Promise<void> {
    return this.running(account).react(to, reference, emoji);
  }

  sendFile(account: string, to: string, file: OutboundFile, caption: string, options?: SendOptions): Promise<SendReceipt> {
    return this.running(account).sendFile(to, file, caption, options);
  }

  split(text: string): string[] {
    return splitMessage(text, DISCORD_LIMIT);
  }

  sendVoice(account: string, to: string, voice: OutboundVoice, options: SendOptions = {}): Promise<SendReceipt | void> {
    return this.voiceThrough(account, to, voice, options);
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
