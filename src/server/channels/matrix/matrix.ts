/**
 * Matrix over the client-server API (https://spec.matrix.org/v1.11/client-server-api/):
 * one long-polled /sync per account (sync.ts), its access token from the
 * secret store, its calls over node:http and node:https (api.ts).
 *
 * A room of two is a direct chat with the other member; a room named in
 * `rooms` (or any room, with "*") is a group room, answered when the account
 * is mentioned. Invites are accepted from senders who may talk (allowFrom,
 * approved); the others wait, with a pairing request for the operator, and
 * are joined once approved (rooms.ts). End-to-end encrypted rooms and direct
 * chats are read and answered as a device of the account's own (crypto.ts),
 * unless `encryption` is off: then they are refused with the reason.
 *
 * Here: the account's life (set up, sync, fail and wait, stop), its sending,
 * and the channel.
 */
import { randomUUID } from 'node:crypto';
import { ChannelSendError, type Channel, type ChannelContext, type ChannelSettings, type OutboundFile, type OutboundVoice, type SendOptions, type SendReceipt } from '../../kernel/channel.ts';
import { AccountChannel, AccountConnection } from '../account-channel.ts';
import { accountsOf, settingPath } from '../accounts.ts';
import { splitMessage } from '../formatting.ts';
import { describeNetworkError } from '../network-errors.ts';
import { homeserverOf, MatrixApi, MatrixError, Refused, ROOM, USER_ID, type Content } from './api.ts';
import { CryptoFailure, MatrixCrypto } from './crypto.ts';
import { MatrixRooms } from './rooms.ts';
import { MatrixSync, SyncTokenUnknown } from './sync.ts';
import { fileMessage, inThread, reaction, threadOf } from './outbound.ts';
import { voiceMessage } from './voice.ts';
import { uploadEncrypted } from './attachments-crypto.ts';

/** Longest text sent in one event (an event is at most 64 KiB of JSON, escapes included). */
export const MATRIX_LIMIT = 8000;

interface MatrixAccountSettings { enabled: boolean; homeserver?: string; userId?: string; rooms: string[]; encryption: boolean }

/** The accounts of a Matrix channel's settings: the top level (its homeserver) and each of `accounts`. */
export function matrixAccounts(settings: ChannelSettings): Map<string, MatrixAccountSettings> {
  return accountsOf<MatrixAccountSettings>(settings, {
    keys: ['homeserver', 'userId', 'rooms', 'encryption'], inherited: { homeserver: true, encryption: true }, defaults: { rooms: [], encryption: true }, hasDefault: (top) => Boolean(top.homeserver),
  });
}

const secretFor = (channelId: string, account: string) => settingPath(channelId, account, 'accessToken');
/** Where an account's encryption state is kept among the channel's cursors (an account's name never has a slash). */
const cryptoCursor = (account: string) => `${account}/crypto`;

class MatrixAccount extends AccountConnection<MatrixAccountSettings> {
  private stopped = false;
  /** Whether the token is known good and the rooms joined: syncing may go on. */
  private ready = false;
  private client?: MatrixApi;
  private me?: string;
  private device?: string;
  private displayName?: string;
  private crypto?: MatrixCrypto;
  private loop?: Promise<void>;
  private readonly rooms: MatrixRooms;
  private readonly sync: MatrixSync;

  constructor(channelId: string, name: string, settings: () => MatrixAccountSettings | undefined, context: ChannelContext) {
    super(channelId, name, settings, context);
    const owner = {
      name,
      log: () => this.log,
      api: () => this.api,
      me: () => this.me!,
      displayName: () => this.displayName,
      rooms: () => this.settings()?.rooms ?? [],
      admit: context.admit,
      save: () => this.sync.save(),
      encrypts: () => this.crypto !== undefined,
      crypto: () => this.crypto,
      context,
      synced: () => this.setState('connected', this.connectedDetail()),
    };
    this.rooms = new MatrixRooms(owner);
    this.sync = new MatrixSync(owner, this.rooms);
  }

  /** Where the account is connected, and what it cannot read yet. */
  private connectedDetail(): string | undefined {
    const waiting = this.sync.undecryptedSummary();
    return waiting ? `${this.me}; ${waiting}` : this.me;
  }

  /** The account's API client, once set up. */
  private get api(): MatrixApi {
    if (!this.client) throw new Error('the Matrix account is not set up');
    return this.client;
  }

  get selfName(): string | undefined {
    return this.status.state === 'connected' ? this.me : undefined;
  }

  start(): void {
    this.loop = this.run();
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      try {
        if (!this.ready) await this.setUp();
        await this.sync.once();
        this.reconnect.succeeded();
      } catch (error) {
        if (this.stopped) return;
        await this.failed(error);
      }
    }
  }

  /** Waits before trying again: the homeserver's own wait, backoff, or (a refused token or setting) the longest wait. */
  private async failed(error: unknown): Promise<void> {
    const max = this.reconnect.longest;
    let wait = this.reconnect.next();
    let detail = error instanceof Error ? error.message : String(error);
    if (error instanceof Refused) {
      this.ready = false;
      this.setState('error', detail);
      wait = max;
    } else if (error instanceof MatrixError && (error.errcode === 'M_UNKNOWN_TOKEN' || error.errcode === 'M_MISSING_TOKEN' || error.status === 401)) {
      this.ready = false;
      detail = `the homeserver refused the access token (${error.message}); set a valid one: gateway secrets set ${secretFor(this.channelId, this.name)}`;
      this.setState('error', detail);
      wait = max;
    } else if (error instanceof SyncTokenUnknown) {
      // The homeserver no longer knows where the account left off (its database restored, or the token damaged): it
      // starts again from now, as a new account does. What was said in between is not read.
      this.ready = false;
      this.sync.since = undefined;
      await this.sync.save().catch((saving: unknown) => this.log.warn({ err: saving }, 'matrix: the cleared sync token could not be stored'));
      wait = 0;
      detail = `the homeserver does not know the stored sync token (${error.message}); reading from now on`;
      this.setState('connecting', detail);
    } else if (error instanceof CryptoFailure) {
      this.setState('error', detail);
    } else {
      if (error instanceof MatrixError && error.retryAfterMs !== undefined) wait = error.retryAfterMs;
      if (!(error instanceof MatrixError)) detail = `cannot reach the homeserver: ${describeNetworkError(error, this.settings()?.homeserver)}`;
      // Connected before, and not refused: it is reconnecting, and says why.
      this.setState(this.ready ? 'connecting' : 'disconnected', detail);
    }
    this.sync.quick = true;
    this.log.warn({ error: detail, retryInMs: wait }, 'matrix account not syncing; retrying');
    await this.reconnect.wait(wait);
  }

  /** Reads the token, asks the homeserver who it belongs to, joins the configured rooms, and (first time only) skips the history. */
  private async setUp(): Promise<void> {
    const settings = this.settings();
    const homeserver = homeserverOf(settings?.homeserver);
    this.setState('connecting');
    const token = await this.context.secret(secretFor(this.channelId, this.name));
    if (!token) throw new Refused(`no access token: printf %s "$TOKEN" | gateway secrets set ${secretFor(this.channelId, this.name)}`);
    this.client = new MatrixApi(homeserver, token);
    const whoami = await this.api.call<{ user_id?: unknown; device_id?: unknown }>('GET', '/v3/account/whoami');
    if (typeof whoami.user_id !== 'string' || !USER_ID.test(whoami.user_id)) throw new MatrixError(200, undefined, 'the homeserver did not say whose access token this is');
    if (settings?.userId && settings.userId !== whoami.user_id) {
      throw new Refused(`the access token is ${whoami.user_id}'s, not ${settings.userId}'s: set the right token, or userId`);
    }
    this.me = whoami.user_id;
    await this.openCrypto(settings?.encryption !== false, typeof whoami.device_id === 'string' ? whoami.device_id : undefined);
    const profile = await this.api.call<{ displayname?: unknown }>('GET', `/v3/profile/${encodeURIComponent(this.me)}/displayname`).catch(() => ({ displayname: undefined }));
    this.displayName = typeof profile.displayname === 'string' && profile.displayname.trim() ? profile.displayname.trim() : undefined;
    await this.sync.load();
    await this.rooms.joinConfigured(settings?.rooms ?? []);
    if (this.sync.since === undefined) await this.sync.first();
    this.ready = true;
    this.setState('connected', this.connectedDetail());
  }

  /**
   * Opens the account's encryption (its device, from the kept state or
   * made) when it encrypts, and closes it when it no longer does or the
   * access token is now another device's.
   */
  private async openCrypto(encrypts: boolean, device: string | undefined): Promise<void> {
    if (this.crypto && (!encrypts || this.device !== device)) {
      await this.crypto.close();
      this.crypto = undefined;
    }
    this.device = device;
    if (!encrypts || this.crypto) return;
    if (!device || !/^[A-Za-z0-9._=-]{1,255}$/.test(device)) throw new Refused('the homeserver did not say which device the access token is, and encryption needs one: log the bot in to get a token of its own device, or turn encryption off (gateway config set channels.matrix.encryption false)');
    const { context, channelId, name } = this;
    const keepSecret = context.keepSecret;
    const passphrase = settingPath(channelId, name, 'cryptoKey');
    this.crypto = await MatrixCrypto.open({
      store: `gateway-${channelId}-${name}`,
      userId: this.me!,
      deviceId: device,
      api: () => this.api,
      log: () => this.log,
      passphrase: {
        name: passphrase,
        get: () => context.secret(passphrase),
        keep: async (value) => {
          if (!keepSecret) throw new Refused(`set a passphrase for the encryption keys: gateway secrets set ${passphrase}`);
          await keepSecret(passphrase, value);
        },
      },
      state: { get: () => context.cursor.get(cryptoCursor(name)), set: (value) => context.cursor.set(cryptoCursor(name), value) },
    });
  }

  async react(to: string, reference: string, emoji: string): Promise<void> {
    await this.put(threadOf(to).room, 'm.reaction', `react.${reference}.${emoji}`, reaction(reference, emoji));
  }

  async sendFile(to: string, file: OutboundFile, caption: string, options: SendOptions = {}): Promise<SendReceipt> {
    const { room, thread } = threadOf(to);
    // Into an encrypted room the bytes go encrypted (attachments-crypto.ts), and the event with them.
    return this.put(room, 'm.room.message', options.idempotencyKey ?? randomUUID(), async (encrypted) => fileMessage(file,
      encrypted ? await uploadEncrypted((type, data) => this.api.upload(undefined, type, data), file) : await this.api.upload(file.name, file.mimeType, file.data), caption, thread));
  }

  /** A voice note (voice.ts), after the answer's text. */
  async sendVoice(to: string, voice: OutboundVoice, options: SendOptions = {}): Promise<SendReceipt> {
    const { room, thread } = threadOf(to);
    // Into an encrypted room the audio goes encrypted, as a file does (attachments-crypto.ts), and the event with it.
    return this.put(room, 'm.room.message', options.idempotencyKey ?? randomUUID(), async (encrypted) => voiceMessage(voice,
      encrypted ? await uploadEncrypted((type, data) => this.api.upload(undefined, type, data), voice) : await this.api.upload(voice.name, voice.mimeType, voice.data), thread));
  }

  /** Sends one event into a room (its content made once the room is known to take it), under a transaction id the homeserver takes once. */
  private async put(to: string, type: string, txnOf: string, content: Record<string, unknown> | ((encrypted: boolean) => Promise<Record<string, unknown>>)): Promise<SendReceipt> {
    if (!this.ready || this.status.state !== 'connected') throw new ChannelSendError(`${this.channelId} account ${this.name} is ${this.status.state}; the message was not sent`);
    try {
      const room = await this.rooms.roomFor(to);
      const encrypted = await this.rooms.encryptedNow(room);
      if (encrypted && !this.crypto) throw new ChannelSendError('the room is end-to-end encrypted and this account\'s encryption is off (channels.matrix.encryption)', { permanent: true });
      const txn = Buffer.from(txnOf).toString('base64url').slice(0, 200);
      let body: Content = typeof content === 'function' ? await content(encrypted) : content;
      let eventType = type;
      if (encrypted) {
        body = await this.encrypted(room, body, type);
        eventType = 'm.room.encrypted';
      }
      const sent = await this.api.call<{ event_id?: unknown }>('PUT', `/v3/rooms/${encodeURIComponent(room)}/send/${eventType}/${txn}`, body);
      return { ids: [typeof sent.event_id === 'string' ? sent.event_id : txn] };
    } catch (error) {
      throw this.sendError(error);
    }
  }

  async send(target: string, text: string, options: SendOptions = {}): Promise<SendReceipt> {
    if (!this.ready || this.status.state !== 'connected') throw new ChannelSendError(`${this.channelId} account ${this.name} is ${this.status.state}; the message was not sent`);
    const { room: to, thread } = threadOf(target);
    try {
      const room = await this.rooms.roomFor(to);
      const encrypted = await this.rooms.encryptedNow(room);
      if (encrypted && !this.crypto) throw new ChannelSendError('the room is end-to-end encrypted and this account\'s encryption is off (channels.matrix.encryption)', { permanent: true });
      // The homeserver takes a transaction id once: a retry of a message it took already is not posted twice.
      const txn = options.idempotencyKey ? options.idempotencyKey.replace(/[^A-Za-z0-9._~-]/g, '_').slice(0, 200) : randomUUID();
      let type = 'm.room.message';
      let content: Content = options.editOf
        ? { msgtype: 'm.text', body: `* ${text}`, 'm.new_content': { msgtype: 'm.text', body: text }, 'm.relates_to': { rel_type: 'm.replace', event_id: options.editOf } }
        : { msgtype: 'm.text', body: text, 'm.mentions': {}, ...inThread(thread) };
      if (encrypted) {
        content = await this.encrypted(room, content, type);
        type = 'm.room.encrypted';
      }
      const sent = await this.api.call<{ event_id?: unknown }>('PUT', `/v3/rooms/${encodeURIComponent(room)}/send/${type}/${encodeURIComponent(options.editOf ? `${txn}.${randomUUID()}` : txn)}`, content);
      // An edit keeps the id of the message it edits: later edits go to that one.
      return { ids: [options.editOf ?? (typeof sent.event_id === 'string' ? sent.event_id : txn)] };
    } catch (error) {
      throw this.sendError(error);
    }
  }

  /** A message's content encrypted for the room's members' devices (the room key shared with them first). */
  private async encrypted(room: string, content: Content, type: string): Promise<Content> {
    const members = await this.rooms.memberIds(room);
    if (!members) throw new ChannelSendError('Matrix: the account is no longer in the room', { permanent: true });
    try {
      return await this.crypto!.encrypt(room, members, type, content);
    } catch (error) {
      if (error instanceof CryptoFailure) throw new ChannelSendError(`Matrix: the message could not be encrypted: ${error.message}`);
      throw error;
    }
  }

  private sendError(error: unknown): ChannelSendError {
    if (error instanceof ChannelSendError) return error;
    if (error instanceof MatrixError) {
      if (error.retryAfterMs !== undefined) return new ChannelSendError(`Matrix: ${error.message}`, { retryAfterMs: error.retryAfterMs });
      // Not in the room, no such room or person, an event the homeserver will never take: trying again cannot help.
      return new ChannelSendError(`Matrix: ${error.message}`, { permanent: error.status === 400 || error.status === 403 || error.status === 404 || error.status === 413 });
    }
    return new ChannelSendError(`cannot reach the homeserver: ${describeNetworkError(error, this.settings()?.homeserver)}`);
  }

  async typing(to: string): Promise<void> {
    if (!this.ready || this.status.state !== 'connected') return;
    const room = await this.rooms.roomFor(threadOf(to).room);
    await this.api.call('PUT', `/v3/rooms/${encodeURIComponent(room)}/typing/${encodeURIComponent(this.me!)}`, { typing: true, timeout: 10_000 });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.sync.stop();
    this.reconnect.stop();
    await this.loop?.catch(() => undefined);
    await this.crypto?.close().catch(() => undefined);
    this.setState('disconnected');
  }
}

export class MatrixChannel extends AccountChannel<MatrixAccount, MatrixAccountSettings> implements Channel {
  readonly edits = true;
  /** The media store's usual limit (Synapse's max_upload_size is 50 MB by default). */
  readonly fileLimit = 50 * 1024 * 1024;

  react(account: string, to: string, reference: string, emoji: string): Promise<void> {
    return this.running(account).react(to, reference, emoji);
  }

  sendFile(account: string, to: string, file: OutboundFile, caption: string, options?: SendOptions): Promise<SendReceipt> {
    return this.running(account).sendFile(to, file, caption, options);
  }

  sendVoice(account: string, to: string, voice: OutboundVoice, options?: SendOptions): Promise<SendReceipt | void> {
    return this.voiceThrough(account, to, voice, options);
  }

  protected accountsOf(settings: ChannelSettings): Map<string, MatrixAccountSettings> {
    return matrixAccounts(settings);
  }

  protected open(name: string, settings: () => MatrixAccountSettings | undefined): MatrixAccount {
    const account = new MatrixAccount(this.id, name, settings, this.context);
    account.start();
    return account;
  }

  split(text: string): string[] {
    return splitMessage(text, MATRIX_LIMIT);
  }

  normalizePeer(peer: string): string {
    return peer.trim();
  }

  /** A room id (!...) or alias (#...) is a room; a person is their user id (@name:server). */
  isRoom(peer: string): boolean {
    return /^[!#]/.test(peer.trim());
  }

  checkPeer(peer: string): string | undefined {
    const value = peer.trim();
    return USER_ID.test(value) || ROOM.test(value) ? undefined : 'is not a Matrix user id (@name:example.org), room id (!id:example.org) or alias (#name:example.org)';
  }
}
