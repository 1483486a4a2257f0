/**
 * What the chat-app channels share: one live connection per enabled account
 * of the channel's settings, started and stopped together, their states
 * reported (a disabled account as such), and a send or a webhook delivery
 * handed to the account it names.
 */
import type { ChannelState } from '../../shared/channels.ts';
import { ChannelSendError, type AccountStatus, type ChannelContext, type ChannelRequest, type ChannelResponse, type ChannelSettings, type OutboundVoice, type SendOptions, type SendReceipt } from '../kernel/channel.ts';
import { Reconnect } from './reconnect.ts';
import { refusal } from './webhook.ts';

/** One account's connection, as the channel holds it. */
export interface LiveAccount {
  readonly current: AccountStatus;
  /** The name the account goes by now (rooms address it by it); undefined while it is not connected. */
  readonly selfName?: string;
  stop(): Promise<void>;
  /** Delivers one message; rejects when the account cannot send now (a ChannelSendError says whether and when to try again). */
  send(to: string, text: string, options: SendOptions): Promise<SendReceipt | void>;
  /** Sends a voice note, where the platform carries them. */
  sendVoice?(to: string, voice: OutboundVoice, options: SendOptions): Promise<SendReceipt | void>;
  /** Shows the recipient that a reply is being written, where the platform can. */
  typing?(to: string): Promise<void>;
  receive?(request: ChannelRequest): Promise<ChannelResponse>;
  /** Checks a webhook request came from the platform (Channel.verify). */
  verify?(request: ChannelRequest): ChannelResponse | undefined;
}

/**
 * One account's connection, as each chat channel keeps it: its channel and
 * name, its live settings, and its state, told to the gateway when it
 * changes (and only then).
 */
export abstract class AccountConnection<S> {
  protected status: AccountStatus;
  readonly name: string;
  protected readonly channelId: string;
  protected readonly settings: () => S | undefined;
  protected readonly context: ChannelContext;
  /** When to try again after a failure: backoff up to the channel's reconnectMaxDelayMs (60 s by default). */
  protected readonly reconnect: Reconnect;

  constructor(channelId: string, name: string, settings: () => S | undefined, context: ChannelContext, backoff: { jitter?: number } = {}) {
    this.channelId = channelId;
    this.name = name;
    this.settings = settings;
    this.context = context;
    this.status = { account: name, state: 'disconnected', since: Date.now() };
    this.reconnect = new Reconnect({ maxDelayMs: () => Number(context.settings().reconnectMaxDelayMs ?? 60_000), ...backoff });
  }

  get current(): AccountStatus {
    return this.status;
  }

  protected get log() {
    return this.context.logger.child({ channel: this.channelId, account: this.name });
  }

  protected setState(state: ChannelState, detail?: string): void {
    if (this.status.state === state && this.status.detail === detail) return;
    this.status = { account: this.name, state, ...(detail ? { detail } : {}), since: Date.now() };
    this.context.stateChanged(this.status);
  }
}

export abstract class AccountChannel<A extends LiveAccount, S extends { enabled: boolean }> {
  protected readonly live = new Map<string, A>();
  readonly id: string;
  protected readonly context: ChannelContext;

  constructor(id: string, context: ChannelContext) {
    this.id = id;
    this.context = context;
  }

  /** The accounts the channel's settings describe, by name. */
  protected abstract accountsOf(settings: ChannelSettings): Map<string, S>;
  /** Makes one account's connection and sets it going; `settings` reads the account's settings live. */
  protected abstract open(name: string, settings: () => S | undefined): A;

  accounts(): string[] {
    return [...this.accountsOf(this.context.settings()).keys()];
  }

  async start(): Promise<void> {
    for (const [name, settings] of this.accountsOf(this.context.settings())) {
      if (!settings.enabled) continue;
      this.live.set(name, this.open(name, () => this.accountsOf(this.context.settings()).get(name)));
    }
  }

  async stop(): Promise<void> {
    await Promise.all([...this.live.values()].map((account) => account.stop()));
  }

  status(): AccountStatus[] {
    return this.accounts().map((name) => this.live.get(name)?.current ?? { account: name, state: 'disconnected', detail: 'account disabled', since: Date.now() });
  }

  send(account: string, to: string, text: string, options: SendOptions = {}): Promise<SendReceipt | void> {
    return this.running(account).send(to, text, options);
  }

  /** A voice note, through the account it names (a channel that carries voice notes offers this as its sendVoice). */
  protected voiceThrough(account: string, to: string, voice: OutboundVoice, options: SendOptions = {}): Promise<SendReceipt | void> {
    const live = this.running(account);
    if (!live.sendVoice) throw new ChannelSendError(`${this.id} account ${account} cannot send voice notes`, { permanent: true });
    return live.sendVoice(to, voice, options);
  }

  /** Never fails: a typing indicator that does not show is no loss. */
  async typing(account: string, to: string): Promise<void> {
    await this.live.get(account)?.typing?.(to).catch(() => undefined);
  }

  selfName(account: string): string | undefined {
    return this.live.get(account)?.selfName;
  }

  /** The running account a send names; a ChannelSendError when there is none. */
  protected running(account: string): A {
    const live = this.live.get(account);
    if (!live) throw new ChannelSendError(`${this.id} has no running account ${account}`);
    return live;
  }

  /** Checks a webhook request with the account it names (Channel.verify); one no running account takes is refused as handOver refuses it. */
  verify(request: ChannelRequest): ChannelResponse | undefined {
    const live = this.live.get(request.account);
    if (!live?.receive) return refusal(404, 'not_found', `Channel ${this.id} has no running account ${request.account} that takes webhook deliveries.`);
    return live.verify?.(request);
  }

  /** Hands a webhook delivery to the account it names (the channels that take deliveries answer receive() with it). */
  protected handOver(request: ChannelRequest): Promise<ChannelResponse> {
    const live = this.live.get(request.account);
    if (!live?.receive) return Promise.resolve(refusal(404, 'not_found', `Channel ${this.id} has no running account ${request.account} that takes webhook deliveries.`));
    return live.receive(request);
  }
}
