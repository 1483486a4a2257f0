import type { Logger } from 'pino';
import { MAX_MESSAGE_CHARS, PAIRING_CODE_TTL_MS } from '../../shared/channels.ts';
import type { GatewayConfig } from '../../shared/config/types.ts';
import type { ChannelInfo, ChannelStatus, DmPairingRequestView, PairApproved } from '../../shared/protocol/results.ts';
import type { AccountStatus, Channel, ChannelKind, ChannelRequest, ChannelResponse, ChannelSettings, InboundMessage } from '../kernel/channel.ts';
import { DomainError } from '../kernel/errors.ts';
import { STARTED_LATE } from '../kernel/threads.ts';
import { peerPerson } from '../kernel/person.ts';
import { observe, observed, type ChannelMessageObserved } from '../kernel/observe.ts';
import diagnostics from 'node:diagnostics_channel';
import type { DecisionFailure, DmPairing, DmPairingRequest } from './dm-pairing.ts';
import type { Session, SessionMessage, Sessions } from '../sessions/module.ts';
import type { Db, Store, Tx } from '../store/database.ts';
import type { Outbox, OutboxItem } from './outbox.ts';
import type { Attachments, Fetched } from './attachments.ts';
import { refusal } from './webhook.ts';

export interface ChannelManagerDeps {
  /** The channel kinds in the table in force (built in and from plugins), by id. */
  kinds: () => ReadonlyMap<string, { value: ChannelKind }>;
  config: () => GatewayConfig;
  secret: (name: string) => Promise<string | undefined>;
  logger: Logger;
  pairing: DmPairing;
  sessions: Sessions;
  store: Store;
  outbox: Outbox;
  attachments: Attachments;
  /** Pushes an event to operators holding the scope. */
  emit: (event: string, payload: unknown, scope: string) => void;
  /**
   * Runs a channel's connection on exactly one daemon of the gateway (several
   * share a PostgreSQL store): start is called when this daemon takes it.
   * Without it, this daemon always does.
   */
  singleton?: (name: string, handlers: { start(): Promise<void>; stop(): Promise<void> }) => void;
  now?: () => number;
}

/** How long an operator's send waits for its message's first attempt before answering that it is queued. */
const SEND_WAIT_MS = 10_000;

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

export const pairRequestView = (request: DmPairingRequest): DmPairingRequestView => ({
  channel: request.channel, account: request.account, code: request.code, sender: request.sender, senderName: request.senderName,
  createdAt: iso(request.createdAt), expiresAt: iso(request.expiresAt),
});

/** A message that reached a session: a direct message from an allowed sender, or one said in a room. */
export interface Inbound {
  channel: string;
  message: InboundMessage;
  session: Session;
  recorded: SessionMessage;
}

/**
 * Told of each message that reaches a session, in the transaction that
 * records it: what it writes there (an agent's answer queued as a job)
 * commits with the message, or not at all.
 */
export type InboundListener = (inbound: Inbound, tx: Tx) => Promise<void> | void;

const FAILURE_TEXT: Record<DecisionFailure, string> = {
  unknown: 'is unknown',
  expired: 'has expired',
  rejected: 'was rejected',
  approved: 'was already approved',
};

/**
 * Runs the profile's channels and decides what each inbound message reaches:
 * the DM policy, pairing codes for strangers, and sessions for everyone allowed.
 */
export class ChannelManager {
  private readonly running = new Map<string, Channel>();
  /** Channel accounts that have connected since the daemon started ("<channel>\n<account>"). */
  private readonly connectedOnce = new Set<string>();
  private readonly listeners: InboundListener[] = [];
  private readonly failed = new Map<string, string>();
  /** Channels another daemon of the gateway runs now (a shared store); this one takes over if it stops. */
  private readonly standby = new Set<string>();
  /** Each channel's inbound messages are handled one after another, in the order they came. */
  private readonly inboundQueues = new Map<string, Promise<void>>();
  private readonly now: () => number;
  private readonly deps: ChannelManagerDeps;

  constructor(deps: ChannelManagerDeps) {
    this.deps = deps;
    this.now = deps.now ?? Date.now;
  }

  private settings(id: string): ChannelSettings | undefined {
    return this.deps.config().channels[id] as ChannelSettings | undefined;
  }

  /** Tells a listener of every message that reaches a session (agents answer from here). */
  onInbound(listener: InboundListener): void {
    this.listeners.push(listener);
  }

  /** The name an account goes by on its channel (an IRC nick), when it is connected. */
  selfName(channel: string, account: string): string | undefined {
    return this.running.get(channel)?.selfName?.(account);
  }

  /**
   * Starts every enabled channel; connections are made in the background. With
   * a shared store each channel connects from one daemon only, the one holding
   * its singleton; the others wait to take over.
   */
  async start(): Promise<void> {
    for (const [id, settings] of Object.entries(this.deps.config().channels)) {
      if (!settings.enabled) continue;
      const kind = this.kind(id);
      if (!kind) {
        this.failed.set(id, `no channel named ${id} is installed`);
        this.deps.logger.error({ channel: id }, 'configured channel is not installed');
        continue;
      }
      const handlers = { start: () => this.open(id, kind), stop: () => this.close(id) };
      if (this.deps.singleton) {
        this.standby.add(id);
        this.deps.singleton(`channel:${id}`, handlers);
      } else {
        await handlers.start();
      }
    }
  }

  private async open(id: string, kind: ChannelKind): Promise<void> {
    this.standby.delete(id);
    this.failed.delete(id);
    try {
      const channel = await kind.create(id, {
        settings: () => this.settings(id) ?? { enabled: false, dmPolicy: 'pairing', allowFrom: [] },
        secret: this.deps.secret,
        logger: this.deps.logger,
        inbound: (message) => this.enqueueInbound(id, message),
        stateChanged: (status) => {
          this.deps.emit('channel.status', this.statusView(id, status), 'operator.read');
          // Connected again after a drop: what waits for it goes now.
          if (status.state === 'connected' && this.connectedOnce.has(`${id}\n${status.account}`)) {
            this.deps.outbox.retryNow(id, status.account).catch((error: unknown) => this.deps.logger.warn({ channel: id, err: error }, 'waiting replies could not be sent at once'));
          }
          // An account's first connection is start-up work done after the daemon was ready: what it left can go back.
          if (status.state === 'connected' && !this.connectedOnce.has(`${id}\n${status.account}`)) {
            this.connectedOnce.add(`${id}\n${status.account}`);
            diagnostics.channel(STARTED_LATE).publish({ channel: id, account: status.account });
          }
        },
        cursor: { get: (account) => this.deps.outbox.cursor(id, account), set: (account, cursor) => this.deps.outbox.setCursor(id, account, cursor) },
        admit: (request) => this.admit(id, request),
      });
      this.running.set(id, channel);
      await channel.start();
      // Replies waiting for this channel go out from the daemon that runs it.
      this.deps.outbox.attach(channel);
    } catch (error) {
      this.failed.set(id, (error as Error).message);
      this.deps.logger.error({ channel: id, err: error }, 'channel failed to start');
    }
  }

  private async close(id: string): Promise<void> {
    const channel = this.running.get(id);
    if (!channel) return;
    this.running.delete(id);
    if (this.deps.singleton) this.standby.add(id);
    await this.deps.outbox.detach(id);
    await channel.stop().catch((error: unknown) => {
      this.deps.logger.warn({ channel: id, err: error }, 'channel did not stop cleanly');
    });
  }

  async stop(): Promise<void> {
    await Promise.all([...this.running.keys()].map((id) => this.close(id)));
    this.standby.clear();
    await this.settled();
  }

  /** Resolves once every inbound message that has arrived so far is handled. */
  async settled(): Promise<void> {
    while (this.inboundQueues.size > 0) await Promise.allSettled(this.inboundQueues.values());
  }

  private statusView(channel: string, status: AccountStatus): ChannelStatus {
    return { channel, account: status.account, state: status.state, ...(status.detail ? { detail: status.detail } : {}), since: new Date(status.since).toISOString() };
  }

  /** Every configured account of every channel, with its connection state. */
  status(): ChannelStatus[] {
    const out: ChannelStatus[] = [];
    for (const [id, settings] of Object.entries(this.deps.config().channels)) {
      const channel = this.running.get(id);
      if (channel) {
        out.push(...channel.status().map((status) => this.statusView(id, status)));
      } else {
        const detail = this.failed.get(id) ?? (this.standby.has(id)
          ? 'connected through another daemon of this gateway (shared store); this one takes over if that one stops'
          : settings.enabled ? 'enabled since the daemon started; restart to connect' : 'not enabled');
        out.push({ channel: id, account: 'default', state: this.failed.has(id) ? 'error' : 'disconnected', detail, since: new Date(this.now()).toISOString() });
      }
    }
    return out;
  }

  private kind(id: string): ChannelKind | undefined {
    return this.deps.kinds().get(id)?.value;
  }

  /** The channels the gateway knows, configured or not. */
  async list(): Promise<ChannelInfo[]> {
    const config = this.deps.config().channels;
    const ids = [...new Set([...this.deps.kinds().keys(), ...Object.keys(config)])].sort();
    const approved = await Promise.all(ids.map((id) => this.deps.pairing.allowedCount(id)));
    return ids.map((id, index) => ({
      channel: id,
      label: this.kind(id)?.label ?? 'not installed',
      installed: this.kind(id) !== undefined,
      enabled: config[id]?.enabled ?? false,
      running: this.running.has(id),
      dmPolicy: config[id]?.dmPolicy ?? 'pairing',
      allowFrom: config[id]?.allowFrom ?? [],
      approvedSenders: approved[index]!,
      accounts: this.running.get(id)?.accounts() ?? (config[id] ? ['default'] : []),
    }));
  }

  /** The channel's peer folding (plain lower case for a channel that is not installed). */
  normalizePeer(channel: string, peer: string): string {
    return this.running.get(channel)?.normalizePeer(peer) ?? this.kind(channel)?.normalizePeer(peer) ?? peer.toLowerCase();
  }

  /** Whether a sender may reach sessions: config allowFrom ("*" only under open), or the approved list. */
  async isAllowed(channel: string, sender: string, db: Db = this.deps.store): Promise<boolean> {
    const settings = this.settings(channel);
    if (!settings) return false;
    const allowFrom = settings.allowFrom.map((entry) => (entry === '*' ? entry : this.normalizePeer(channel, entry)));
    if (settings.dmPolicy === 'open' && allowFrom.includes('*')) return true;
    return allowFrom.includes(sender) || this.deps.pairing.isAllowed(channel, sender, db);
  }

  /** A sender asks to talk before saying anything (a Matrix invite): see ChannelContext.admit. */
  private async admit(channel: string, request: { account: string; sender: string; senderName: string; ask: boolean }): Promise<'allowed' | 'pending' | 'refused'> {
    const policy = this.settings(channel)?.dmPolicy ?? 'disabled';
    if (policy === 'disabled') return 'refused';
    if (await this.isAllowed(channel, request.sender)) return 'allowed';
    if (policy !== 'pairing') return 'refused';
    if (!request.ask) return 'pending';
    const outcome = await this.deps.pairing.request(channel, request.account, request.sender, request.senderName);
    if (outcome.kind === 'created') {
      this.deps.logger.info({ channel, account: request.account, sender: request.sender }, 'pairing request made for a sender who asked to talk; approve it with its code from gateway pair list');
      this.deps.emit('channel.pair.requested', pairRequestView(outcome.request), 'operator.pairing');
    }
    return 'pending';
  }

  /**
   * Queues an inbound message behind the channel's earlier ones: each is
   * recorded, and answered, in the order it came. Resolves once it is stored
   * (or dropped): the channel may acknowledge it to its platform then.
   */
  private enqueueInbound(channel: string, message: InboundMessage): Promise<void> {
    // One message that could not be stored holds up none after it.
    const queued = (this.inboundQueues.get(channel) ?? Promise.resolve()).catch(() => undefined).then(() => this.inbound(channel, message));
    this.inboundQueues.set(channel, queued);
    void queued.catch(() => undefined).then(() => {
      if (this.inboundQueues.get(channel) === queued) this.inboundQueues.delete(channel);
    });
    return queued;
  }

  private async inbound(channel: string, message: InboundMessage): Promise<void> {
    const log = this.deps.logger.child({ channel, account: message.account, sender: message.sender });
    try {
      // Files are fetched before the transaction (it never waits on a platform), and only for a message the agent is to read.
      let files: Fetched[] = [];
      if (message.attachments?.length) {
        if (message.platformId !== undefined && await this.deps.outbox.seen(channel, message.account, message.platformId)) return;
        files = await this.files(channel, message, log);
      }
      await this.deps.store.transaction(async (tx) => {
        // A message the platform delivers again (it was not acknowledged in time) is stored once.
        if (message.platformId !== undefined && !(await this.deps.outbox.firstSight(channel, message.account, message.platformId, tx))) {
          log.debug({ platformId: message.platformId }, 'inbound message seen already; dropped');
          return;
        }
        const data = {
          ...(message.platformId ? { platformId: message.platformId } : {}),
          ...(files.length ? { attachments: files.map((file) => file.view) } : {}),
        };
        const entry = {
          direction: 'in' as const, sender: message.sender, senderName: message.senderName, person: peerPerson(channel, message.account, message.sender), text: message.text, at: message.at,
          ...(Object.keys(data).length ? { data } : {}),
        };
        const keep = async (recorded: { session: Session; message: SessionMessage }) => {
          await this.deps.attachments.save(channel, message.account, recorded.session.key, files, tx);
          return recorded;
        };
        if (message.kind === 'group') {
          await this.arrived(channel, message, await keep(await this.record(channel, message.account, 'group', message.room!, message.room!, entry, tx)), tx);
          return;
        }
        const policy = this.settings(channel)?.dmPolicy ?? 'disabled';
        if (policy === 'disabled') {
          log.debug('direct message ignored: the DM policy is disabled');
          return;
        }
        if (await this.isAllowed(channel, message.sender, tx)) {
          const peer = message.thread ? `${message.sender}#${message.thread}` : message.sender;
          await this.arrived(channel, message, await keep(await this.record(channel, message.account, 'direct', peer, message.senderName, entry, tx)), tx);
          return;
        }
        if (policy !== 'pairing') {
          log.debug(`direct message from an unknown sender dropped (DM policy ${policy})`);
          return;
        }
        const outcome = await this.deps.pairing.request(channel, message.account, message.sender, message.senderName, tx);
        if (outcome.kind === 'full') {
          log.info('pairing request ignored: this account already has the most pending codes');
          return;
        }
        if (outcome.kind === 'pending') return;
        const { request } = outcome;
        log.info({ expiresAt: new Date(request.expiresAt).toISOString() }, 'pairing code issued');
        tx.afterCommit(() => this.deps.emit('channel.pair.requested', pairRequestView(request), 'operator.pairing'));
        const minutes = Math.round(PAIRING_CODE_TTL_MS / 60_000);
        const text = `Hello ${message.senderName}. This gateway only talks to people its operator has approved. `
          + `Your pairing code is ${request.code} (valid for ${minutes} minutes). Ask the operator to run: gateway pair approve ${channel} ${request.code}`;
        await this.deps.outbox.enqueue({ channel, account: message.account, to: message.replyTo ?? message.senderName, text, key: `pair:${channel}:${request.code}` }, tx);
      });
    } catch (error) {
      log.error({ err: error }, 'inbound message could not be handled');
      throw error;
    }
  }

  /**
   * The files of a message, fetched when the agent is to read it: an allowed
   * sender's direct message, a room's message addressed to the account. A
   * stranger's files are never fetched; a room's chatter is named, not kept.
   */
  private async files(channel: string, message: InboundMessage, log: Logger): Promise<Fetched[]> {
    const attachments = message.attachments ?? [];
    const settings = this.settings(channel);
    const reads = message.kind === 'group' ? message.addressed !== undefined : settings?.dmPolicy !== 'disabled' && await this.isAllowed(channel, message.sender);
    if (!reads) {
      if (message.kind !== 'group') return [];
      return this.deps.attachments.fetch(attachments, 0, log).then((files) => files.map((file) => ({ view: { ...file.view, note: 'not kept: the message was not addressed to the agent' } })));
    }
    return this.deps.attachments.fetch(attachments, Number(settings?.maxAttachmentBytes ?? 10 * 1024 * 1024), log);
  }

  private record(channel: string, account: string, kind: 'direct' | 'group', peer: string, peerName: string, message: { direction: 'in' | 'out'; sender: string; senderName?: string; person?: string; text: string; at: number; via?: string; data?: Record<string, unknown> }, db?: Db) {
    return this.deps.sessions.record({ channel, account, kind, peer, peerName, ...message }, db);
  }

  private async arrived(channel: string, message: InboundMessage, recorded: { session: Session; message: SessionMessage }, tx: Tx): Promise<void> {
    tx.afterCommit(() => observe(observed.channelMessage, (): ChannelMessageObserved => ({ channel, direction: 'in' })));
    for (const listener of this.listeners) await listener({ channel, message, session: recorded.session, recorded: recorded.message }, tx);
  }

  /** Shows a recipient that a reply is being written, where the channel runs here and can show it; never fails. */
  async typing(channel: string, account: string, to: string): Promise<void> {
    await this.running.get(channel)?.typing?.(account, to).catch(() => undefined);
  }

  /**
   * A platform's webhook delivery for a channel account, handed to the
   * channel that runs here. 404 for a channel or account that takes none;
   * 503 (the platform delivers again) while another daemon runs the channel.
   */
  async receive(channelId: string, request: ChannelRequest): Promise<ChannelResponse> {
    const channel = this.running.get(channelId);
    if (channel?.receive && channel.accounts().includes(request.account)) return channel.receive(request);
    if (this.standby.has(channelId)) return refusal(503, 'unavailable', `Channel ${channelId} is connected through another daemon of this gateway; point the platform at that one.`);
    return refusal(404, 'not_found', 'No channel account here takes webhook deliveries at this address.');
  }

  /**
   * A reply shown as it is written, where channels.<id>.streaming is on and
   * the channel runs on this daemon and edits messages: undefined otherwise.
   */
  stream(channel: string, account: string, to: string): ReplyStream | undefined {
    const running = this.running.get(channel);
    if (this.settings(channel)?.streaming !== true || !running?.edits) return undefined;
    return new ReplyStream(running, account, to, this.deps.logger.child({ channel, account }));
  }

  /** Whether a reply to this message of the session is queued already (a retried answer job's earlier attempt did its work). */
  answered(sessionKey: string, turnId: number): Promise<boolean> {
    return this.deps.outbox.answered(sessionKey, turnId);
  }

  /** Queues a reply in the outbox (in the caller's transaction, when it gives one). */
  reply(item: OutboxItem, db?: Db): Promise<boolean> {
    return this.deps.outbox.enqueue(item, db);
  }

  /** A channel named in the config or offered by a module or plugin; anything else is not found, whatever else the request says. */
  assertKnown(id: string): void {
    if (this.settings(id) || this.kind(id)) return;
    const known = [...new Set([...Object.keys(this.deps.config().channels), ...this.deps.kinds().keys()])].sort();
    throw new DomainError('not_found', `No channel named ${id} (channels: ${known.join(', ') || 'none'}).`);
  }

  private channel(id: string): Channel {
    const channel = this.running.get(id);
    if (channel) return channel;
    if (!this.settings(id) && !this.kind(id)) throw new DomainError('not_found', `No channel named ${id}.`);
    if (this.standby.has(id)) throw new DomainError('unavailable', `Channel ${id} is connected through another daemon of this gateway; send through that one (gateway store status names it).`);
    throw new DomainError('unavailable', `Channel ${id} is not running (${this.failed.get(id) ?? (this.settings(id)?.enabled ? 'enabled after the daemon started; restart it' : `enable it: gateway config set channels.${id}.enabled true`)}).`);
  }

  private account(channel: Channel, requested: string | undefined): string {
    const accounts = channel.accounts();
    if (requested !== undefined) {
      if (!accounts.includes(requested)) throw new DomainError('not_found', `Channel ${channel.id} has no account ${requested} (accounts: ${accounts.join(', ')}).`);
      return requested;
    }
    if (accounts.length === 1) return accounts[0]!;
    if (accounts.includes('default')) return 'default';
    throw new DomainError('invalid', `Channel ${channel.id} has several accounts (${accounts.join(', ')}); name one.`);
  }

  /**
   * An operator's message (gateway message send, a tool, a hook): recorded in
   * its session and queued in the outbox in one transaction, so it is sent,
   * and tried again, like every reply; the answer waits for its first attempt
   * and says what became of it. A message whose account is down is sent once
   * the account is back.
   */
  async send(input: { channel: string; account?: string; to: string; text: string; via: string }) {
    const channel = this.channel(input.channel);
    const account = this.account(channel, input.account);
    const problem = channel.checkPeer(input.to);
    if (problem) throw new DomainError('invalid', `Recipient ${JSON.stringify(input.to)} ${problem}.`);
    if (input.text.trim().length === 0) throw new DomainError('invalid', 'The message is empty.');
    if (input.text.length > MAX_MESSAGE_CHARS) throw new DomainError('invalid', `The message is longer than ${MAX_MESSAGE_CHARS} characters.`);
    const kind = channel.isRoom(input.to) ? 'group' : 'direct';
    const { recorded, id } = await this.deps.store.transaction(async (tx) => {
      const recorded = await this.record(input.channel, account, kind, channel.normalizePeer(input.to), input.to,
        { direction: 'out', sender: 'operator', text: input.text, at: this.now(), via: input.via }, tx);
      const id = await this.deps.outbox.queue({ channel: input.channel, account, to: input.to, text: input.text, sessionKey: recorded.session.key }, tx);
      return { recorded, id: id! };
    });
    const delivery = await this.deps.outbox.firstAttempt(id, SEND_WAIT_MS);
    // Given up at once (the platform refused it for good): the caller hears why, as before.
    if (delivery.status === 'failed') throw new DomainError('unavailable', `${delivery.error ?? 'The platform refused the message'} (outbox ${id}).`);
    return { ...recorded, delivery };
  }

  /** Approves a code; with notify, tells the sender. Failures name why the code cannot be approved. */
  async approve(channelId: string, code: string, actor: string, notify: boolean): Promise<PairApproved> {
    this.assertKnown(channelId);
    const outcome = await this.deps.pairing.approve(channelId, code, actor);
    if ('failure' in outcome) {
      if (outcome.failure === 'approved') return { approved: true as const, alreadyApproved: true, ...pairRequestView(outcome.request!), notified: false };
      throw new DomainError('not_found', `Pairing code ${code} on channel ${channelId} ${FAILURE_TEXT[outcome.failure]}.`);
    }
    const { request } = outcome;
    this.deps.emit('channel.pair.resolved', { ...pairRequestView(request), decision: 'approved' }, 'operator.pairing');
    let notified = false;
    let notifyError: string | undefined;
    if (notify) {
      try {
        this.channel(channelId);
        // The sender's id reaches them on every channel (a folded IRC nick, a Telegram user's chat); sent through the outbox, once.
        const id = await this.deps.outbox.queue({ channel: channelId, account: request.account, to: request.sender, text: 'You are approved: this gateway now accepts your messages.', key: `pair-approved:${channelId}:${request.code}` });
        if (id !== undefined) {
          const delivery = await this.deps.outbox.firstAttempt(id, SEND_WAIT_MS);
          notified = delivery.status === 'sent';
          if (!notified) notifyError = delivery.status === 'pending' ? `${delivery.error ?? 'not sent yet'}; it is sent when it can be (outbox ${id})` : delivery.error ?? 'not delivered';
        }
      } catch (error) {
        notifyError = (error as Error).message;
      }
    }
    return { approved: true as const, alreadyApproved: false, ...pairRequestView(request), notified, ...(notifyError ? { notifyError } : {}) };
  }

  async reject(channelId: string, code: string, actor: string): Promise<{ rejected: true } & DmPairingRequestView> {
    this.assertKnown(channelId);
    const outcome = await this.deps.pairing.reject(channelId, code, actor);
    if ('failure' in outcome) throw new DomainError('not_found', `Pairing code ${code} on channel ${channelId} ${FAILURE_TEXT[outcome.failure]}.`);
    this.deps.emit('channel.pair.resolved', { ...pairRequestView(outcome.request), decision: 'rejected' }, 'operator.pairing');
    return { rejected: true as const, ...pairRequestView(outcome.request) };
  }

  async revoke(channelId: string, sender: string): Promise<{ revoked: true; channel: string; sender: string }> {
    this.assertKnown(channelId);
    const folded = this.normalizePeer(channelId, sender);
    if (await this.deps.pairing.revoke(channelId, folded)) return { revoked: true as const, channel: channelId, sender: folded };
    const inConfig = (this.settings(channelId)?.allowFrom ?? []).some((entry) => entry !== '*' && this.normalizePeer(channelId, entry) === folded);
    if (inConfig) {
      throw new DomainError('invalid', `${sender} is allowed by channels.${channelId}.allowFrom in the config, not by pairing; change it there: gateway config set channels.${channelId}.allowFrom`);
    }
    throw new DomainError('not_found', `${sender} is not on the allow-list of channel ${channelId}.`);
  }
}

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
