import { createRequire } from 'node:module';
import { ChannelSendError, type Channel, type ChannelContext, type ChannelSettings } from '../../kernel/channel.ts';
import { AccountChannel, AccountConnection } from '../account-channel.ts';
import { accountsOf, settingPath } from '../accounts.ts';
import { checkIrcTarget, ircFold, isIrcRoom } from './irc-names.ts';

const QUIT_WAIT_MS = 2000;
/** How long a send waits for the server to confirm it (the answer to a PING sent behind it). */
const CONFIRM_WAIT_MS = 10_000;
/** Server errors that mean a message did not reach its target. */
const UNDELIVERED = new Set(['no_such_nick', 'cannot_send_to_channel', 'cannot_send_to_user', 'no_such_channel']);
let confirmations = 0;

interface AccountSettings {
  host?: string;
  port?: number;
  tls: boolean;
  nick?: string;
  username?: string;
  realname?: string;
  sasl: boolean;
  rooms: string[];
  enabled: boolean;
}

/** The accounts of an IRC channel's settings: the top level (when it names a host, or there is no other) and each entry of `accounts`. */
export function ircAccounts(settings: ChannelSettings): Map<string, AccountSettings> {
  return accountsOf<AccountSettings>(settings, {
    keys: ['host', 'port', 'tls', 'nick', 'username', 'realname', 'sasl', 'rooms'],
    // Rooms are each account's own.
    inherited: { host: true, port: true, tls: true, nick: true, username: true, realname: true, sasl: true },
    defaults: { tls: false, sasl: false, rooms: [] },
    hasDefault: (top, others) => top.host !== undefined || others.length === 0,
  });
}

type IrcClient = {
  connect(options: Record<string, unknown>): void;
  quit(message?: string): void;
  say(target: string, message: string): void;
  ping(message?: string): void;
  join(channel: string): void;
  changeNick(nick: string): void;
  on(event: string, listener: (...args: any[]) => void): void;
  removeListener(event: string, listener: (...args: any[]) => void): void;
  removeAllListeners(): void;
  connection: { end(data?: string): void };
  user: { nick: string };
};

/** One connection to one IRC server, reconnecting with backoff until stopped. */
class IrcAccount extends AccountConnection<AccountSettings> {
  private client?: IrcClient;
  private stopped = false;
  private registered = false;
  private closed?: () => void;
  private nickTries = 0;

  private readonly Client: new () => IrcClient;

  constructor(channelId: string, name: string, settings: () => AccountSettings | undefined, context: ChannelContext, Client: new () => IrcClient) {
    // Servers that restart drop every client at once: the tries are spread so they do not all come back together.
    super(channelId, name, settings, context, { jitter: 0.2 });
    this.Client = Client;
  }

  async connect(): Promise<void> {
    if (this.stopped) return;
    const settings = this.settings();
    if (!settings?.host || !settings.nick) {
      this.setState('error', `set ${settingPath(this.channelId, this.name, 'host')} and .nick`);
      return;
    }
    const secretName = settingPath(this.channelId, this.name, 'password');
    let password: string | undefined;
    try {
      password = await this.context.secret(secretName);
    } catch (error) {
      this.setState('error', `could not read the secret ${secretName}: ${(error as Error).message}`);
      this.scheduleRetry();
      return;
    }
    if (settings.sasl && !password) {
      this.setState('error', `SASL is on but the secret ${secretName} is not set`);
      return;
    }
    if (this.stopped) return;
    const port = settings.port ?? (settings.tls ? 6697 : 6667);
    this.setState('connecting', `${settings.host}:${port}`);
    this.registered = false;
    this.nickTries = 0;
    const client = new this.Client();
    this.client = client;
    client.on('registered', (event: { nick: string }) => {
      this.registered = true;
      this.reconnect.succeeded();
      this.setState('connected', `${settings.host}:${port} as ${event.nick}`);
      this.log.info({ server: `${settings.host}:${port}`, nick: event.nick }, 'IRC connected');
      for (const room of settings.rooms) client.join(room);
    });
    client.on('nick in use', () => {
      if (this.registered) return;
      this.nickTries += 1;
      const base = settings.nick!;
      client.changeNick(this.nickTries <= 2 ? `${base}${'_'.repeat(this.nickTries)}` : `${base}${Math.floor(Math.random() * 1000)}`);
    });
    client.on('sasl failed', (event: { reason: string }) => {
      this.setState('error', `SASL authentication failed (${event.reason})`);
    });
    client.on('irc error', (event: { error: string; reason?: string }) => {
      this.log.warn({ error: event.error, reason: event.reason }, 'IRC server reported an error');
      // Refused before registration (a wrong password, a ban): say so until a later attempt succeeds.
      if (!this.registered && (event.error === 'irc' || event.error === 'password_mismatch')) {
        const hint = event.error === 'password_mismatch' || /password/i.test(event.reason ?? '') ? ` (check the secret ${secretName})` : '';
        this.setState('error', `the server refused the connection: ${event.reason ?? event.error}${hint}`);
      }
    });
    client.on('privmsg', (event: { nick?: string; target: string; message: string; from_server: boolean; time?: number }) => {
      if (event.from_server || !event.nick || ircFold(event.nick) === ircFold(client.user.nick)) return;
      const group = isIrcRoom(event.target);
      // IRC acknowledges nothing: a message that could not be stored is logged by the gateway, and gone.
      void this.context.inbound({
        account: this.name,
        sender: ircFold(event.nick),
        senderName: event.nick,
        kind: group ? 'group' : 'direct',
        ...(group ? { room: ircFold(event.target) } : {}),
        text: event.message,
        at: event.time ?? Date.now(),
      }).catch(() => undefined);
    });
    let socketError: string | undefined;
    client.on('socket close', (error?: Error | false) => {
      if (error) socketError = error.message;
    });
    client.on('close', () => {
      if (this.client !== client) return;
      client.removeAllListeners();
      this.client = undefined;
      const wasRegistered = this.registered;
      this.registered = false;
      if (this.stopped) {
        this.setState('disconnected');
        this.closed?.();
        return;
      }
      if (socketError && !wasRegistered) this.setState('error', `could not connect to ${settings.host}:${port}: ${socketError}`);
      else if (this.status.state !== 'error') this.setState('disconnected', `lost the connection to ${settings.host}:${port}${socketError ? ` (${socketError})` : ''}`);
      this.log.warn({ server: `${settings.host}:${port}`, error: socketError }, 'IRC connection closed');
      this.scheduleRetry();
    });
    client.connect({
      host: settings.host,
      port,
      tls: settings.tls,
      rejectUnauthorized: true,
      nick: settings.nick,
      username: settings.username ?? (settings.nick.replace(/[^A-Za-z0-9]/g, '').slice(0, 10) || 'gateway'),
      gecos: settings.realname ?? 'gateway',
      // A server password only: an account object without credentials keeps the library from also trying it for SASL.
      ...(password && !settings.sasl ? { password, account: {} } : {}),
      ...(password && settings.sasl ? { account: { account: settings.username ?? settings.nick, password } } : {}),
      sasl_disconnect_on_fail: true,
      auto_reconnect: false,
      version: 'gateway',
      ping_interval: 30,
      ping_timeout: 120,
    });
  }

  private scheduleRetry(): void {
    if (this.stopped) return;
    const delay = this.reconnect.next();
    this.log.info({ inMs: Math.round(delay) }, 'IRC reconnect scheduled');
    this.reconnect.schedule(() => void this.connect(), delay);
  }

  /** The nick this account has on the server now. */
  get selfName(): string | undefined {
    return this.registered ? this.client?.user.nick : undefined;
  }

  /**
   * Sends and waits for the server's word on it: a server handles a client's
   * lines in order, so an error about the target (no such nick, cannot send to
   * the room) comes before the answer to a PING sent right behind the message,
   * and that answer means the message went through.
   */
  async send(to: string, text: string): Promise<void> {
    const client = this.client;
    if (!client || !this.registered) throw new Error(`${this.channelId} account ${this.name} is ${this.status.state}; the message was not sent`);
    const token = `gw${process.pid}.${++confirmations}`;
    const target = ircFold(to);
    await new Promise<void>((resolve, reject) => {
      const finish = (outcome: () => void) => {
        clearTimeout(timer);
        client.removeListener('irc error', onError);
        client.removeListener('pong', onPong);
        client.removeListener('close', onClose);
        outcome();
      };
      const onError = (event: { error: string; nick?: string; channel?: string; reason?: string }) => {
        if (!UNDELIVERED.has(event.error) || ircFold(event.nick ?? event.channel ?? '') !== target) return;
        finish(() => reject(new ChannelSendError(`${to} cannot be reached on ${this.channelId} (${event.reason ?? event.error.replace(/_/g, ' ')}); the message was not delivered`)));
      };
      const onPong = (event: { message?: string }) => {
        if (event.message === token) finish(resolve);
      };
      const onClose = () => finish(() => reject(new Error(`the connection to ${this.channelId} closed before the server confirmed the message; it may not have been delivered`)));
      const timer = setTimeout(() => finish(() => reject(new Error(`the ${this.channelId} server did not confirm the message within ${CONFIRM_WAIT_MS / 1000} s; it may not have been delivered`))), CONFIRM_WAIT_MS);
      client.on('irc error', onError);
      client.on('pong', onPong);
      client.on('close', onClose);
      client.say(to, text);
      client.ping(token);
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.reconnect.stop();
    const client = this.client;
    if (!client) {
      this.setState('disconnected');
      return;
    }
    await new Promise<void>((resolve) => {
      this.closed = resolve;
      const bound = setTimeout(() => {
        client.removeAllListeners();
        client.connection.end();
        this.client = undefined;
        this.setState('disconnected');
        resolve();
      }, QUIT_WAIT_MS);
      bound.unref();
      client.quit('gateway stopping');
    });
  }
}

/** IRC through irc-framework: several accounts, rooms, server password or SASL PLAIN, reconnect with backoff. */
export class IrcChannel extends AccountChannel<IrcAccount, AccountSettings> implements Channel {
  private Client?: new () => IrcClient;

  protected accountsOf(settings: ChannelSettings): Map<string, AccountSettings> {
    return ircAccounts(settings);
  }

  protected open(name: string, settings: () => AccountSettings | undefined): IrcAccount {
    const account = new IrcAccount(this.id, name, settings, this.context, this.Client!);
    void account.connect();
    return account;
  }

  override async start(): Promise<void> {
    ({ Client: this.Client } = createRequire(import.meta.url)('irc-framework') as { Client: new () => IrcClient });
    await super.start();
  }

  normalizePeer(peer: string): string {
    return ircFold(peer);
  }

  isRoom(peer: string): boolean {
    return isIrcRoom(peer);
  }

  checkPeer(peer: string): string | undefined {
    return checkIrcTarget(peer);
  }
}
