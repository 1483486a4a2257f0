/**
 * Signal through signal-cli's HTTP daemon (rpc.ts): one Signal account
 * (a number signal-cli registered, or linked to a phone) per gateway
 * account; direct messages under the DM policy, groups answered when the
 * account is mentioned or quoted, typing shown while an agent works, read
 * receipts once a message is stored, files fetched from signal-cli.
 *
 * What signal-cli does about acknowledgement decides what can be lost.
 * signal-cli itself takes each envelope from Signal's server, keeps it on
 * its disk, acknowledges it to the server, decrypts it, hands it to whoever
 * listens at that moment, and deletes it: it never waits for a client to say
 * it has a message. So the account makes signal-cli take a message only
 * when it asks for one: with signal-cli started with --receive-mode=manual,
 * it calls `receive` for at most one message at a time, and asks for the
 * next only once that one is stored. Signal's server keeps everything else
 * while the gateway is stopped, restarts or is killed. What remains at risk:
 * the one message a `receive` in flight takes when the gateway dies before
 * reading its answer (signal-cli goes on waiting up to RECEIVE_WAIT_S for
 * it, and writes it to a closed connection). A gateway that stops in order
 * waits for that call to end, and stores what it brings.
 *
 * A signal-cli that receives by itself (its default --receive-mode
 * on-start, or another client subscribed) refuses `receive`; the account
 * then reads the event stream, which signal-cli writes whatever becomes of
 * it: whatever arrives while the gateway is not connected is lost, and the
 * account's status says so, with the option that fixes it.
 */
import type { Channel, ChannelSettings, InboundAttachment, InboundMessage, OutboundFile, OutboundVoice, SendOptions, SendReceipt } from '../../kernel/channel.ts';
import { ChannelSendError } from '../../kernel/channel.ts';
import { AccountChannel, AccountConnection } from '../account-channel.ts';
import { accountsOf, settingPath } from '../accounts.ts';
import { TooLarge } from '../attachments.ts';
import { splitMessage } from '../formatting.ts';
import { readReceived, type SignalMessage } from './envelope.ts';
import { markdownToSignal } from './format.ts';
import { isGroupId, PHONE, signalPeer, signalPeerProblem } from './peers.ts';
import { DEFAULT_RPC_URL, rpcUrlOf, SignalDaemon, SignalHttpError, SignalRpcError } from './rpc.ts';
import { attachmentParams, reactionParams, SIGNAL_FILE_LIMIT } from './outgoing.ts';
import { INVALID_PARAMS, isObject, METHOD_NOT_FOUND, sendError, USER_ERROR } from './send-errors.ts';

/** Longest text sent in one message: what Signal shows whole (signal-cli sends a longer one as a text attachment). */
export const SIGNAL_LIMIT = 2000;
/** How long one `receive` waits for a message: also the longest a stopping gateway waits for the call in flight. */
export const RECEIVE_WAIT_S = 5;
/** A stopping account waits this much past the call's own wait before it lets the call go. */
const STOP_GRACE_MS = 3000;
/** An event stream that says nothing (not even its keep-alive, every 15 s) for this long is dead. */
const QUIET_MS = 60_000;
/** Tries to store a message signal-cli handed over (it cannot be asked for again) before it is given up. */
const MAX_STORE_TRIES = 8;

interface SignalAccountSettings { enabled: boolean; account?: string; rpcUrl?: string; rooms: string[] }

/**
 * The accounts of a Signal channel's settings: the top level (when it names a
 * number, or nothing else does: then it says a number is missing) and each
 * of `accounts`, which share its rpcUrl unless they give one.
 */
export function signalAccounts(settings: ChannelSettings): Map<string, SignalAccountSettings> {
  return accountsOf<SignalAccountSettings>(settings, {
    keys: ['account', 'rpcUrl', 'rooms'], inherited: { rpcUrl: true }, defaults: { rooms: [] }, hasDefault: (top, others) => Boolean(top.account) || others.length === 0,
  });
}

/** What only an operator can fix (a setting, an account signal-cli does not have): tried again after the longest wait. */
class Setup extends Error {}

/** The commands that get a Signal number into signal-cli, and its daemon running as the gateway needs it. */
export function setupCommands(number: string, url: URL): string {
  const listen = `${url.hostname.replace(/^\[|\]$/g, '')}:${url.port || (url.protocol === 'https:' ? 443 : 80)}`;
  return `link it to a phone (signal-cli link -n gateway, and scan the sgnl:// address it prints as a QR code: Signal > Settings > Linked devices) `
    + `or register the number (signal-cli -a ${number} register, then signal-cli -a ${number} verify <code>), `
    + `then run: signal-cli -a ${number} daemon --http ${listen} --receive-mode=manual`;
}

class SignalAccount extends AccountConnection<SignalAccountSettings> {
  private stopped = false;
  private loop?: Promise<void>;
  private daemon?: SignalDaemon;
  private number = '';
  /** signal-cli serves several accounts (started without -a): each call names this one. */
  private multi = false;
  /** The account's ACI, learned once: mentions and quotes may name only it. */
  private aci?: string;
  /** signal-cli was found receiving by itself: refused again, the account goes back to its event stream at once. */
  private receivesByItself = false;
  /** Aborts what the account waits on: the event stream at once, a `receive` in flight only past the stop's grace. */
  private readonly abort = new AbortController();
  private stream?: AbortController;

  start(): void {
    // Nothing an account meets may stop the daemon: its loop logs what it did not expect, and goes on.
    this.loop = this.run().catch((error: unknown) => this.log.error({ err: error }, 'signal account stopped unexpectedly'));
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      try {
        await this.connect();
        await this.listen();
      } catch (error) {
        if (this.stopped) return;
        await this.failed(error);
      }
    }
  }

  /** Calls one of signal-cli's methods for this account. */
  private call<T>(method: string, params: Record<string, unknown> = {}, options: { timeoutMs?: number; maxBytes?: number; signal?: AbortSignal } = {}): Promise<T> {
    if (!this.daemon) return Promise.reject(new ChannelSendError(`${this.channelId} account ${this.name} is not connected`));
    return this.daemon.call<T>(method, this.multi ? { account: this.number, ...params } : params, { signal: this.abort.signal, ...options });
  }

  /** Finds signal-cli, and the account in it. */
  private async connect(): Promise<void> {
    this.setState('connecting');
    const settings = this.settings();
    const number = settings?.account;
    if (!number || !PHONE.test(number)) throw new Setup(`set the account's number: gateway config set ${settingPath(this.channelId, this.name, 'account')} +15550100 (the number signal-cli has)`);
    this.number = number;
    let url: URL;
    try {
      url = rpcUrlOf(settings?.rpcUrl);
    } catch (error) {
      throw new Setup((error as Error).message);
    }
    this.daemon = new SignalDaemon(url);
    const { version } = await this.daemon.call<{ version?: unknown }>('version', {}, { signal: this.abort.signal });
    try {
      const accounts = await this.daemon.call<unknown>('listAccounts', {}, { signal: this.abort.signal });
      this.multi = true;
      const numbers = Array.isArray(accounts) ? accounts.filter(isObject).map((entry) => entry.number) : [];
      if (!numbers.includes(number)) throw new Setup(`signal-cli at ${url.origin} has no account ${number}: ${setupCommands(number, url)}`);
    } catch (error) {
      // Started with -a, signal-cli serves that one account and has no listAccounts: whose it is shows in what it receives.
      if (!(error instanceof SignalRpcError && error.code === METHOD_NOT_FOUND)) throw error;
      this.multi = false;
    }
    if (!this.aci) {
      const status = await this.call<unknown>('getUserStatus', { recipient: [number] }).catch((error: unknown) => {
        this.log.info({ error: (error as Error).message }, 'signal: the account\'s ACI is not known; mentions are recognised by its number only');
        return [];
      });
      const own = Array.isArray(status) ? status.filter(isObject).find((entry) => entry.number === number || entry.recipient === number) : undefined;
      if (typeof own?.uuid === 'string' && /^[0-9a-f-]{36}$/i.test(own.uuid)) this.aci = own.uuid.toLowerCase();
    }
    this.log.info({ version: typeof version === 'string' ? version : undefined, multiAccount: this.multi }, 'signal: signal-cli answers');
  }

  /**
   * Asks signal-cli for one message at a time, and for the next only once it
   * is stored; a signal-cli that receives by itself is read through its
   * event stream instead.
   */
  private async listen(): Promise<void> {
    this.setState('connected', this.number);
    let refusedSince: number | undefined;
    for (;;) {
      let items: unknown;
      const asked = Date.now();
      try {
        // Not aborted when the account stops (only past its grace): what the call brings is stored first.
        items = await this.call<unknown>('receive', { timeout: RECEIVE_WAIT_S, maxMessages: 1 }, { timeoutMs: (RECEIVE_WAIT_S + 30) * 1000 });
      } catch (error) {
        if (!(error instanceof SignalRpcError && error.code === USER_ERROR && /already being received/i.test(error.message))) throw error;
        // Refused: signal-cli receives by itself, or a `receive` of a gateway that died still runs (it ends within its wait).
        refusedSince ??= Date.now();
        if (this.receivesByItself || Date.now() - refusedSince > RECEIVE_WAIT_S * 1000 + STOP_GRACE_MS) {
          this.receivesByItself = true;
          return this.readStream();
        }
        await this.reconnect.wait(1000);
        if (this.stopped) return;
        continue;
      }
      refusedSince = undefined;
      this.receivesByItself = false;
      if (this.status.state !== 'connected') this.setState('connected', this.number);
      this.reconnect.succeeded();
      const received = Array.isArray(items) ? items : [];
      for (const item of received) await this.take(item);
      if (this.stopped) return;
      // A signal-cli answering "nothing" at once (not waiting as asked) is not asked again at once.
      if (received.length === 0 && Date.now() - asked < RECEIVE_WAIT_S * 100) await this.reconnect.wait(RECEIVE_WAIT_S * 1000);
    }
  }

  /** The event stream of a signal-cli that receives by itself: what it sends while the gateway is away is lost, and the status says so. */
  private async readStream(): Promise<void> {
    if (this.stopped) return;
    this.stream = new AbortController();
    const detail = `${this.number} (signal-cli receives by itself, so what arrives while the gateway is away is lost: start it with --receive-mode=manual)`;
    this.log.warn('signal: signal-cli receives messages by itself (not --receive-mode=manual); reading its event stream, and whatever arrives while the gateway is not connected is lost');
    this.setState('connected', detail);
    for await (const event of this.daemon!.events(this.multi ? this.number : undefined, this.stream.signal, QUIET_MS)) {
      if (event.event !== 'receive') continue;
      let item: unknown;
      try {
        item = JSON.parse(event.data);
      } catch {
        this.log.warn({ bytes: event.data.length }, 'signal: an event that is not JSON; skipped');
        continue;
      }
      await this.take(item);
      this.reconnect.succeeded();
    }
    if (!this.stopped) throw new Error('signal-cli closed its event stream');
  }

  /** One received envelope: a person's message is stored (then marked read where an agent reads it); the rest is let go. */
  private async take(item: unknown): Promise<void> {
    const reading = readReceived(item, { number: this.number, ...(this.aci ? { aci: this.aci } : {}) });
    if ('skip' in reading) {
      if (reading.otherAccount && !this.multi) throw new Setup(`signal-cli at ${this.daemon!.url.origin} runs for ${reading.otherAccount}, not ${this.number}: set ${settingPath(this.channelId, this.name, 'account')} to ${reading.otherAccount}, or run signal-cli -a ${this.number} daemon`);
      this.log.debug({ reason: reading.skip }, 'signal: an envelope that is not a message to answer; skipped');
      return;
    }
    const message = this.inbound(reading.message);
    if (!message) return;
    await this.store(message, reading.message);
    void this.markRead(reading.message, message).catch((error: unknown) => this.log.debug({ error: (error as Error).message }, 'signal: a read receipt was not sent'));
  }

  /**
   * Stores a message, trying again while it fails: signal-cli cannot hand it
   * over again. One that cannot be stored after MAX_STORE_TRIES, or when the
   * account stops meanwhile, is lost, and the log says whose it was.
   */
  private async store(message: InboundMessage, signal: SignalMessage): Promise<void> {
    for (let tries = 1; ; tries++) {
      try {
        await this.context.inbound(message);
        return;
      } catch (error) {
        if (tries >= MAX_STORE_TRIES || this.stopped) {
          this.log.error({ err: error, sender: signal.sender, timestamp: signal.timestamp }, 'signal: a message could not be stored and is lost (signal-cli cannot hand it over again)');
          return;
        }
        this.log.warn({ err: error, tries }, 'signal: a message could not be stored; trying again');
        await this.reconnect.wait();
      }
    }
  }

  /** A Signal message as the gateway takes it: a direct message, or a group's in a room the agent may answer in. */
  private inbound(message: SignalMessage): InboundMessage | undefined {
    const base = {
      account: this.name, sender: message.sender, senderName: message.senderName, text: message.text, at: message.timestamp, platformId: message.id, reference: message.id,
      ...(message.files.length ? { attachments: message.files.map((file) => this.attachment(file, message)) } : {}),
    };
    if (!message.group) return { ...base, kind: 'direct', replyTo: message.sender };
    const rooms = this.settings()?.rooms ?? [];
    if (!rooms.includes('*') && !rooms.includes(message.group)) {
      this.log.debug({ group: message.group }, 'message in a Signal group the agent may not answer in (channels.<id>.rooms); skipped');
      return undefined;
    }
    return { ...base, kind: 'group', room: message.group, replyTo: message.group, addressed: message.addressed ? { text: message.addressedText } : undefined };
  }

  /** A file signal-cli downloaded with the message, read back with getAttachment (its bytes in base64). */
  private attachment(file: SignalMessage['files'][number], message: SignalMessage): InboundAttachment {
    return {
      name: file.name, ...(file.contentType ? { mimeType: file.contentType } : {}), ...(file.size !== undefined ? { size: file.size } : {}), ...(file.voice ? { voice: true } : {}),
      fetch: async (maxBytes, signal) => {
        const where = message.group ? { groupId: message.group } : { recipient: message.address };
        const answer = await this.call<{ data?: unknown }>('getAttachment', { id: file.id, ...where }, { signal, maxBytes: Math.ceil(maxBytes / 3) * 4 + 4096 })
          .catch((error: unknown) => {
            throw error instanceof TooLarge ? new TooLarge(maxBytes) : error;
          });
        if (typeof answer?.data !== 'string') throw new Error('signal-cli gave no data for the file');
        const bytes = Buffer.from(answer.data, 'base64');
        if (bytes.length > maxBytes) throw new TooLarge(maxBytes);
        return bytes;
      },
    };
  }

  /** Tells the sender their message was read, where an agent reads it: an allowed sender's direct message, a group message for the account. */
  private async markRead(signal: SignalMessage, message: InboundMessage): Promise<void> {
    const read = message.kind === 'group'
      ? message.addressed !== undefined
      : await this.context.admit({ account: this.name, sender: message.sender, senderName: message.senderName, ask: false }) === 'allowed';
    if (!read || this.status.state !== 'connected') return;
    await this.call('sendReceipt', { recipient: signal.address, targetTimestamp: [signal.timestamp], type: 'read' });
  }

  /** Waits before trying again: the longest wait for what only an operator can fix, else backoff. */
  private async failed(error: unknown): Promise<void> {
    const url = this.daemon?.url ?? new URL(DEFAULT_RPC_URL);
    let wait = this.reconnect.next();
    let state: 'error' | 'disconnected' | 'connecting' = this.status.state === 'connected' ? 'connecting' : 'disconnected';
    let detail: string;
    if (error instanceof Setup) {
      state = 'error';
      detail = error.message;
      wait = this.reconnect.longest;
    } else if (error instanceof SignalRpcError && (error.code === INVALID_PARAMS || error.code === METHOD_NOT_FOUND)) {
      // signal-cli no longer has the account (removed from a multi-account daemon), or is a version without the method.
      state = 'error';
      detail = `signal-cli refused ${this.number}: ${error.message}; ${setupCommands(this.number, url)}`;
      wait = this.reconnect.longest;
    } else if (error instanceof SignalHttpError && (error.status === 421 || error.status === 404)) {
      state = 'error';
      detail = error.status === 404 ? `nothing at ${url.href}api/v1/rpc: is rpcUrl the address of signal-cli's daemon --http?` : error.message;
      wait = this.reconnect.longest;
    } else if (error instanceof SignalRpcError || error instanceof SignalHttpError) {
      detail = `signal-cli: ${error.message}`;
    } else {
      const reason = (error as NodeJS.ErrnoException)?.code ?? (error as Error)?.message ?? String(error);
      detail = `cannot reach signal-cli at ${url.origin} (${reason}): is its daemon running? ${url.protocol === 'http:' ? `signal-cli -a ${this.number || '<number>'} daemon --http ${url.host} --receive-mode=manual` : 'it runs behind that address, with --receive-mode=manual'}`;
    }
    this.setState(state, detail);
    this.log.warn({ error: detail, retryInMs: Math.round(wait) }, 'signal account not receiving; retrying');
    await this.reconnect.wait(wait);
  }

  /** signal-cli's send addresses a group by groupId, a person by recipient. */
  private static target(to: string): Record<string, unknown> {
    const peer = signalPeer(to);
    return isGroupId(peer) ? { groupId: peer } : { recipient: [peer] };
  }

  /** A message (or, with `extra` and `method`, a reaction or a file: outgoing.ts). */
  async send(to: string, text: string, _options: SendOptions = {}, extra: Record<string, unknown> = {}, method = 'send'): Promise<SendReceipt> {
    if (!this.daemon || this.status.state !== 'connected') throw new ChannelSendError(`${this.channelId} account ${this.name} is ${this.status.state}; the message was not sent`);
    const styled = markdownToSignal(text);
    try {
      const sent = await this.call<{ timestamp?: unknown }>(method, {
        ...SignalAccount.target(to), ...(method === 'send' ? { message: styled.text, ...(styled.styles.length ? { textStyle: styled.styles } : {}) } : {}), ...extra,
      }, { timeoutMs: 60_000 });
      // A Signal message is known by its timestamp: receipts, quotes and edits name it.
      return { ids: typeof sent?.timestamp === 'number' ? [String(sent.timestamp)] : [] };
    } catch (error) {
      throw sendError(error, this.daemon.url);
    }
  }

  async typing(to: string): Promise<void> {
    if (this.status.state !== 'connected') return;
    await this.call('sendTyping', SignalAccount.target(to));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.reconnect.stop();
    this.stream?.abort();
    // A `receive` in flight may bring a message signal-cli has taken already: it is waited for (and stored), within bounds.
    const grace = setTimeout(() => this.abort.abort(), RECEIVE_WAIT_S * 1000 + STOP_GRACE_MS);
    await this.loop;
    clearTimeout(grace);
    this.abort.abort();
    this.setState('disconnected');
  }
}

export class SignalChannel extends AccountChannel<SignalAccount, SignalAccountSettings> implements Channel {
  protected accountsOf(settings: ChannelSettings): Map<string, SignalAccountSettings> {
    return signalAccounts(settings);
  }

  protected open(name: string, settings: () => SignalAccountSettings | undefined): SignalAccount {
    const account = new SignalAccount(this.id, name, settings, this.context, { jitter: 0.2 });
    account.start();
    return account;
  }

  split(text: string): string[] {
    return splitMessage(text, SIGNAL_LIMIT);
  }

  readonly fileLimit = SIGNAL_FILE_LIMIT;

  async react(account: string, to: string, reference: string, emoji: string): Promise<void> {
    await this.running(account).send(to, '', {}, reactionParams(reference, emoji), 'sendReaction');
  }

  sendFile(account: string, to: string, file: OutboundFile, caption: string): Promise<SendReceipt> {
    return this.running(account).send(to, caption, {}, attachmentParams(file));
  }

  /** Signal's apps record voice notes as AAC: an answer spoken back goes so, as an attachment of its own. */
  readonly voiceFormat = 'aac';
  sendVoice(account: string, to: string, voice: OutboundVoice): Promise<SendReceipt> {
    return this.running(account).send(to, '', {}, attachmentParams(voice));
  }

  normalizePeer(peer: string): string {
    return signalPeer(peer);
  }

  isRoom(peer: string): boolean {
    return isGroupId(peer);
  }

  checkPeer(peer: string): string | undefined {
    return signalPeerProblem(peer);
  }
}
