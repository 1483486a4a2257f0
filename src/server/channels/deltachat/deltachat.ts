/**
 * Delta Chat: end-to-end encrypted chat over ordinary e-mail, through its
 * official engine (engine.ts), one engine process per account, its data
 * folder (its database and its keys, which the engine alone keeps) under
 * the profile's folder. People reach the account through its invite link
 * (the account's status shows it): Delta Chat then exchanges keys, and
 * everything after is encrypted.
 *
 * Nothing is lost across a restart or a kill: the engine keeps every
 * message in its own database, and notes the last one the gateway handled
 * (its last_msg_id) only once the gateway has stored it. An account reads,
 * in order, the messages past that note whenever the engine says something
 * came, and once when it starts; a message stored and not yet noted (the
 * gateway died between the two) is known by its id and stored once.
 */
import { chmod, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { T } from '@deltachat/jsonrpc-client';
import { ChannelSendError, type Channel, type ChannelSettings, type OutboundFile, type OutboundVoice, type SendReceipt } from '../../kernel/channel.ts';
import { AccountChannel, AccountConnection } from '../account-channel.ts';
import { accountsOf, settingPath } from '../accounts.ts';
import { Engine, EngineError, EngineGone, enginePath } from './engine.ts';
import { chatFor, sendFailure, sendFileMessage } from './files.ts';
import { loginDigest, loginOf, Setup, type DeltaChatAccountSettings } from './login.ts';
import { contactOf, readMessage } from './messages.ts';
import { deltachatPeer, deltachatPeerProblem, isGroupPeer, peerParts } from './peers.ts';
import { sendVoiceNote } from './voice.ts';

/** How long logging in (finding the servers, checking the password) may take. */
const CONFIGURE_TIMEOUT_MS = 180_000;
/** How long a message whose file is still on the way is waited for before it is taken without it. */
const FILE_WAIT_MS = 120_000;
/** How soon a message waited for is looked at again. */
const FILE_LOOK_MS = 3000;
/** The engine's database notes the login it has by this key (a digest). */
const LOGIN_KEY = 'ui.gateway.login';

/** The accounts of a Delta Chat channel's settings: the top level (its address) and each of `accounts`, which share its servers unless they give theirs. */
export function deltachatAccounts(settings: ChannelSettings): Map<string, DeltaChatAccountSettings> {
  return accountsOf<DeltaChatAccountSettings>(settings, {
    keys: ['address', 'user', 'imap', 'smtp', 'acceptInvalidCertificates', 'displayName', 'rooms'],
    inherited: { imap: true, smtp: true, acceptInvalidCertificates: true },
    defaults: { acceptInvalidCertificates: false, rooms: [] },
    hasDefault: (top, others) => Boolean(top.address) || others.length === 0,
  });
}

type Event = { contextId: number; event: T.EventType };

class DeltaChatAccount extends AccountConnection<DeltaChatAccountSettings> {
  private stopped = false;
  private loop?: Promise<void>;
  private engine?: Engine;
  private accountId = 0;
  private connected = false;
  /** Something came since the messages were last read. */
  private dirty = false;
  private draining?: Promise<void>;
  private later?: NodeJS.Timeout;
  /** Messages whose file is still on the way, since when. */
  private readonly waiting = new Map<number, number>();

  get selfName(): string | undefined {
    if (!this.connected) return undefined;
    const settings = this.settings();
    return settings?.displayName ?? settings?.address?.split('@')[0];
  }

  start(): void {
    // Nothing an account meets may stop the daemon: its loop logs what it did not expect, and goes on.
    this.loop = this.run().catch((error: unknown) => this.log.error({ err: error }, 'deltachat account stopped unexpectedly'));
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      try {
        await this.session();
      } catch (error) {
        if (this.stopped) return;
        await this.failed(error);
      }
    }
  }

  /** One engine's life: started, logged in, reading and sending until it ends or the account stops. */
  private async session(): Promise<void> {
    const settings = this.settings();
    const passwordName = settingPath(this.channelId, this.name, 'password');
    const login = loginOf(settings!, await this.context.secret(passwordName), { address: settingPath(this.channelId, this.name, 'address'), password: passwordName });
    let binary: string;
    try {
      binary = enginePath();
    } catch (error) {
      throw new Setup((error as Error).message);
    }
    if (this.status.state !== 'error') this.setState('connecting');
    // The engine's folder holds the account's keys and messages: the profile's user alone reads it.
    const folder = join(this.context.folder, this.name);
    await mkdir(folder, { recursive: true, mode: 0o700 });
    await chmod(this.context.folder, 0o700);
    await chmod(folder, 0o700);
    const engine = new Engine(binary, folder, (line) => this.log.debug({ engine: line.replace(/\x1b\[[0-9;]*m/g, '') }, 'deltachat engine'));
    this.engine = engine;
    try {
      const id = (await engine.call<number[]>('get_all_account_ids'))[0] ?? await engine.call<number>('add_account');
      this.accountId = id;
      // A bot: people's first messages are no contact requests, and a large file's message is told of once whole.
      await engine.call('batch_set_config', [id, { bot: '1', displayname: settings!.displayName ?? null }]);
      const digest = loginDigest(login);
      if (!(await engine.call<boolean>('is_configured', [id])) || await engine.call<string | null>('get_config', [id, LOGIN_KEY]) !== digest) {
        this.log.info({ address: login.addr }, 'deltachat: logging in');
        await engine.call('add_or_update_transport', [id, login], CONFIGURE_TIMEOUT_MS);
        await engine.call('set_config', [id, LOGIN_KEY, digest]);
      }
      // A new account reads from its first message on (the engine would start at its last).
      if (await engine.call<string | null>('get_config', [id, 'last_msg_id']) === null) await engine.call('set_config', [id, 'last_msg_id', '0']);
      await engine.call('start_io', [id]);
      const invite = await engine.call<string>('get_chat_securejoin_qr_code', [id, null]);
      this.connected = true;
      this.reconnect.succeeded();
      this.setState('connected', `${login.addr}; people write to it through its invite link ${invite}`);
      const events = this.events(engine);
      this.wake();
      const why = await engine.ended;
      await events;
      if (!this.stopped) throw new EngineGone(why);
    } finally {
      this.connected = false;
      this.engine = undefined;
      clearTimeout(this.later);
      await engine.stop();
      await this.draining;
    }
  }

  /** The engine's events, until it ends: a message that came wakes the reading. */
  private async events(engine: Engine): Promise<void> {
    for (;;) {
      let batch: Event[];
      try {
        batch = await engine.call<Event[]>('get_next_event_batch', [], 0);
      } catch {
        return;
      }
      for (const { event } of batch) {
        if (event.kind === 'IncomingMsg' || event.kind === 'IncomingMsgBunch' || event.kind === 'MsgsChanged') this.wake();
        else if (event.kind === 'Error') this.log.warn({ error: event.msg }, 'deltachat engine error');
      }
    }
  }

  /** Reads what came, now or once the reading under way ends. */
  private wake(): void {
    this.dirty = true;
    if (this.draining || this.stopped || !this.connected) return;
    this.draining = this.drain().catch((error: unknown) => {
      if (this.stopped || !this.connected) return;
      // The message stays in the engine, not yet noted: it is read again after a while.
      this.log.warn({ err: error }, 'deltachat: a message could not be stored; trying again');
      this.look(this.reconnect.next());
    }).finally(() => {
      this.draining = undefined;
      if (this.dirty) this.wake();
    });
  }

  private look(ms: number): void {
    clearTimeout(this.later);
    this.later = setTimeout(() => this.wake(), ms);
    this.later.unref();
  }

  /** The messages past the last one handled, in order: each stored, then noted; one whose file is on the way holds up the ones after it. */
  private async drain(): Promise<void> {
    while (this.dirty && !this.stopped && this.engine) {
      this.dirty = false;
      const engine = this.engine;
      const id = this.accountId;
      for (const msgId of await engine.call<number[]>('get_next_msgs', [id])) {
        if (this.stopped) return;
        const message = await engine.call<T.Message>('get_message', [id, msgId]);
        const since = this.waiting.get(msgId) ?? Date.now();
        const reading = await readMessage({ engine, accountId: id, account: this.name, rooms: this.settings()?.rooms ?? [], folder: join(this.context.folder, this.name) }, message, Date.now() - since, FILE_WAIT_MS);
        if ('wait' in reading) {
          if (!this.waiting.has(msgId) && message.downloadState === 'Available') await engine.call('download_full_message', [id, msgId]).catch(() => undefined);
          this.waiting.set(msgId, since);
          this.look(FILE_LOOK_MS);
          return;
        }
        this.waiting.delete(msgId);
        if ('message' in reading) {
          await this.context.inbound(reading.message);
          await engine.call('markseen_msgs', [id, [msgId]]);
          continue;
        }
        if (reading.refused) this.log.warn({ messageId: msgId, from: message.sender.address, reason: reading.skip }, 'deltachat: a message refused');
        else this.log.debug({ messageId: msgId, reason: reading.skip }, 'deltachat: a message let go');
        await engine.call('set_config', [id, 'last_msg_id', String(msgId)]);
      }
    }
  }

  /** Waits before trying again: the longest wait for what only an operator can fix, else backoff. */
  private async failed(error: unknown): Promise<void> {
    let wait = this.reconnect.next();
    let state: 'error' | 'connecting' = 'error';
    let detail: string;
    if (error instanceof Setup) {
      detail = error.message;
      wait = this.reconnect.longest;
    } else if (error instanceof EngineGone) {
      state = 'connecting';
      detail = `${error.message}; starting it again`;
    } else if (error instanceof EngineError) {
      detail = `Delta Chat: ${error.message}`;
    } else detail = (error as Error)?.message ?? String(error);
    this.setState(state, detail);
    this.log.warn({ error: detail, retryInMs: Math.round(wait) }, 'deltachat account not receiving; retrying');
    await this.reconnect.wait(wait);
  }

  async send(to: string, text: string): Promise<SendReceipt> {
    const engine = this.engine;
    if (!engine || !this.connected) throw new ChannelSendError(`${this.channelId} account ${this.name} is ${this.status.state}; the message was not sent`);
    const parts = peerParts(to);
    if (!parts) throw new ChannelSendError(`${to} ${deltachatPeerProblem(to)}`, { permanent: true });
    const id = this.accountId;
    try {
      let chatId: number;
      if ('group' in parts) {
        const chat = await engine.call<T.BasicChat>('get_basic_chat_info', [id, parts.group]).catch(() => undefined);
        if (chat?.chatType !== 'Group') throw new ChannelSendError(`the account is in no group ${to}`, { permanent: true });
        if (chat.isContactRequest) await engine.call('accept_chat', [id, chat.id]);
        chatId = chat.id;
      } else {
        const contact = await contactOf({ engine, accountId: id }, parts.address, parts.contact);
        if (contact === undefined) throw new ChannelSendError(`the account has no key for ${to}: they write to it first, through its invite link (gateway channels status shows it)`, { permanent: true });
        chatId = await engine.call<number>('create_chat_by_contact_id', [id, contact]);
      }
      const sent = await engine.call<number>('misc_send_text_message', [id, chatId, text]);
      return { ids: [String(sent)] };
    } catch (error) {
      if (error instanceof ChannelSendError) throw error;
      // The engine refused (no key, not a member): trying again cannot help. Gone or slow: it can.
      if (error instanceof EngineError) throw new ChannelSendError(`Delta Chat refused the message to ${to}: ${error.message}`, { permanent: true });
      throw new ChannelSendError(`Delta Chat did not take the message to ${to}: ${(error as Error).message}`);
    }
  }

  /** A voice note (voice.ts), into the chat a send to `to` goes to. */
  async sendVoice(to: string, voice: OutboundVoice): Promise<SendReceipt> {
    const engine = this.engine;
    if (!engine || !this.connected) throw new ChannelSendError(`${this.channelId} account ${this.name} is ${this.status.state}; the voice note was not sent`);
    return { ids: [String(await sendVoiceNote(engine, this.accountId, join(this.context.folder, this.name), to, voice))] };
  }

  /** Sends a file with its caption (files.ts): the engine takes a copy, and sends it encrypted as every message. */
  async sendFile(to: string, file: OutboundFile, caption: string): Promise<SendReceipt> {
    const engine = this.engine;
    if (!engine || !this.connected) throw new ChannelSendError(`${this.channelId} account ${this.name} is ${this.status.state}; the file was not sent`);
    try {
      const chatId = await chatFor(engine, this.accountId, to);
      return { ids: [String(await sendFileMessage(engine, this.accountId, chatId, join(this.context.folder, this.name), file, caption))] };
    } catch (error) {
      throw sendFailure(error, to);
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.reconnect.stop();
    clearTimeout(this.later);
    // The engine first: a message being stored is stored, and what it had not noted is read again next time.
    await this.engine?.stop();
    await this.loop;
    this.setState('disconnected');
  }
}

export class DeltaChatChannel extends AccountChannel<DeltaChatAccount, DeltaChatAccountSettings> implements Channel {
  /** What mail servers commonly take in one message, the file grown by a third in transit (base64) and encrypted. */
  readonly fileLimit = 20 * 1024 * 1024;

  sendFile(account: string, to: string, file: OutboundFile, caption: string): Promise<SendReceipt> {
    return this.running(account).sendFile(to, file, caption);
  }

  protected accountsOf(settings: ChannelSettings): Map<string, DeltaChatAccountSettings> {
    return deltachatAccounts(settings);
  }

  protected open(name: string, settings: () => DeltaChatAccountSettings | undefined): DeltaChatAccount {
    const account = new DeltaChatAccount(this.id, name, settings, this.context, { jitter: 0.2 });
    account.start();
    return account;
  }

  /** Delta Chat's apps record voice notes as AAC: an answer spoken back goes so, as a voice message. */
  readonly voiceFormat = 'aac';

  sendVoice(account: string, to: string, voice: OutboundVoice): Promise<SendReceipt | void> {
    return this.voiceThrough(account, to, voice);
  }

  normalizePeer(peer: string): string {
    return deltachatPeer(peer);
  }

  isRoom(peer: string): boolean {
    return isGroupPeer(peer);
  }

  checkPeer(peer: string): string | undefined {
    return deltachatPeerProblem(peer);
  }
}
