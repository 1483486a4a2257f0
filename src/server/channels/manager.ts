import { MAX_MESSAGE_CHARS } from '../../shared/channels.ts';
import { isSecretName } from '../../shared/secrets/names.ts';
import type { GatewayConfig } from '../../shared/config/types.ts';
import type { ChannelInfo, ChannelStatus, DmPairingRequestView, PairApproved } from '../../shared/protocol/results.ts';
import type { AccountStatus, Channel, ChannelKind, ChannelRequest, ChannelResponse, ChannelSettings } from '../kernel/channel.ts';
import { DomainError } from '../kernel/errors.ts';
import { STARTED_LATE } from '../kernel/threads.ts';
import diagnostics from 'node:diagnostics_channel';
import { pairRequestView } from './dm-pairing.ts';
import { SEND_WAIT_MS, tellApproved, undecided } from './pair-notice.ts';
import type { Db } from '../store/database.ts';
import type { OutboxItem } from './outbox/outbox.ts';
import { refusal } from './webhook.ts';
import { ReplyStream } from './reply-stream.ts';
import { Inbox, type Inbound, type InboundListener, type InboxDeps } from './inbox.ts';
import { checkEmoji, reactionTarget, workspaceFile, type WorkspaceOf } from './outbound.ts';

export type { Inbound, InboundListener };

/** The inbox's parts (InboxDeps: logger, pairing, sessions, store, outbox, marks, attachments, emit) and what runs the channels. */
export interface ChannelManagerDeps extends InboxDeps {
  /** The channel kinds in the table in force (built in and from plugins), by id. */
  kinds: () => ReadonlyMap<string, { value: ChannelKind }>;
  config: () => GatewayConfig;
  secret: (name: string) => Promise<string | undefined>;
  /** The profile's folder for a channel's own files. */
  folder: (id: string) => string;
  /** Keeps a secret a channel made for itself; without it, channels cannot keep one. */
  keepSecret?: (name: string, value: string) => Promise<void>;
  /**
   * Runs a channel's connection on exactly one daemon of the gateway (several
   * share a PostgreSQL store): start is called when this daemon takes it.
   * Without it, this daemon always does.
   */
  singleton?: (name: string, handlers: { start(): Promise<void>; stop(): Promise<void> }) => void;
  now?: () => number;
}

/**
 * Runs the profile's channels and decides what each inbound message reaches:
 * the DM policy, pairing codes for strangers, and sessions for everyone allowed.
 */
export class ChannelManager {
  private readonly running = new Map<string, Channel>();
  /** Channel accounts that have connected since the daemon started ("<channel>\n<account>"). */
  private readonly connectedOnce = new Set<string>();
  private readonly failed = new Map<string, string>();
  /** Channels another daemon of the gateway runs now (a shared store); this one takes over if it stops. */
  private readonly standby = new Set<string>();
  private readonly now: () => number;
  private readonly deps: ChannelManagerDeps;

  /** What comes in from the channels: admitted, stored and handed to the listeners (inbox.ts). */
  private readonly inbox: Inbox;

  constructor(deps: ChannelManagerDeps) {
    this.deps = deps;
    this.now = deps.now ?? Date.now;
    this.inbox = new Inbox(deps, (id) => this.settings(id), (channel, peer) => this.normalizePeer(channel, peer), (id) => this.running.get(id)?.react !== undefined);
  }

  /** Where files sent on channels come from: the agents' workspaces (set by the module that keeps them). */
  private workspaceOf: WorkspaceOf = () => {
    throw new DomainError('unavailable', 'Files cannot be sent: no agent workspaces are set up in this daemon.');
  };

  readFilesFrom(workspaceOf: WorkspaceOf): void {
    this.workspaceOf = workspaceOf;
  }

  private settings(id: string): ChannelSettings | undefined {
    return this.deps.config().channels[id] as ChannelSettings | undefined;
  }

  /** Tells a listener of every message that reaches a session (agents answer from here). */
  onInbound(listener: InboundListener): void {
    this.inbox.onInbound(listener);
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

  /** A channel keeps secrets of its own only (channels.<id>.…), and only names the secret store knows. */
  private async keepSecret(id: string, name: string, value: string): Promise<void> {
    if (!name.startsWith(`channels.${id}.`) || !isSecretName(name)) throw new Error(`channel ${id} cannot keep the secret ${name}`);
    await this.deps.keepSecret!(name, value);
  }

  private async open(id: string, kind: ChannelKind): Promise<void> {
    this.standby.delete(id);
    this.failed.delete(id);
    try {
      const channel = await kind.create(id, {
        settings: () => this.settings(id) ?? { enabled: false, dmPolicy: 'pairing', allowFrom: [] },
        secret: this.deps.secret,
        folder: this.deps.folder(id),
        ...(this.deps.keepSecret ? { keepSecret: (name: string, value: string) => this.keepSecret(id, name, value) } : {}),
        logger: this.deps.logger,
        inbound: (message) => this.inbox.enqueue(id, message),
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
        cursor: { get: (account) => this.deps.marks.cursor(id, account), set: (account, cursor) => this.deps.marks.setCursor(id, account, cursor) },
        admit: (request) => this.inbox.admit(id, request),
        pressed: async (press) => (await this.deps.hooks?.pressed(id, press)) ?? {},
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
    await this.inbox.settled();
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
  isAllowed(channel: string, sender: string, db: Db = this.deps.store): Promise<boolean> {
    return this.inbox.isAllowed(channel, sender, db);
  }

  /** Shows a recipient that a reply is being written, where the channel runs here and can show it; never fails. */
  async typing(channel: string, account: string, to: string): Promise<void> {
    await this.running.get(channel)?.typing?.(account, to).catch(() => undefined);
  }

  /**
   * The channel that takes a platform's webhook requests for an account, if
   * it runs here: else why not, 404 for a channel or account that takes
   * none, 503 (the platform delivers again) while another daemon runs it.
   */
  webhookTarget(channelId: string, request: Pick<ChannelRequest, 'account' | 'interaction'>): { channel: Channel } | { refused: ChannelResponse } {
    const channel = this.running.get(channelId);
    if (request.interaction && channel && !channel.buttons) return { refused: refusal(404, 'not_found', `Channel ${channelId} takes no interactions.`) };
    if (channel?.receive && channel.accounts().includes(request.account)) return { channel };
    if (this.standby.has(channelId)) return { refused: refusal(503, 'unavailable', `Channel ${channelId} is connected through another daemon of this gateway; point the platform at that one.`) };
    return { refused: refusal(404, 'not_found', 'No channel account here takes webhook deliveries at this address.') };
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

  /** The audio a channel's voice notes go as (Channel.voiceFormat, else OGG/Opus), where it runs here and its platform carries them; else undefined. */
  voiceOf(channel: string): 'opus' | 'aac' | undefined {
    const running = this.running.get(channel);
    return running?.sendVoice ? running.voiceFormat ?? 'opus' : undefined;
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
  async send(input: { channel: string; account?: string; to: string; text: string; via: string; file?: string; agent?: string }) {
    const channel = this.channel(input.channel);
    const account = this.account(channel, input.account);
    const problem = channel.checkPeer(input.to);
    if (problem) throw new DomainError('invalid', `Recipient ${JSON.stringify(input.to)} ${problem}.`);
    if (input.text.trim().length === 0 && input.file === undefined) throw new DomainError('invalid', 'The message is empty.');
    if (input.text.length > MAX_MESSAGE_CHARS) throw new DomainError('invalid', `The message is longer than ${MAX_MESSAGE_CHARS} characters.`);
    // A file is read (and copied into the outbox) from the agent's workspace only; the channel's agent's when none is named.
    const file = input.file === undefined ? undefined : await workspaceFile(channel, this.workspaceOf(input.agent ?? this.settings(input.channel)?.agent as string | undefined), input.file);
    const kind = channel.isRoom(input.to) ? 'group' : 'direct';
    const { recorded, id } = await this.deps.store.transaction(async (tx) => {
      const recorded = await this.deps.sessions.record({
        channel: input.channel, account, kind, peer: channel.normalizePeer(input.to), peerName: input.to, direction: 'out', sender: 'operator', text: input.text, at: this.now(), via: input.via,
        ...(file ? { data: { file: { name: file.name, mimeType: file.mimeType, size: file.data.length } } } : {}),
      }, tx);
      const id = await this.deps.outbox.queue({ channel: input.channel, account, to: input.to, text: input.text, sessionKey: recorded.session.key, ...(file ? { file } : {}) }, tx);
      return { recorded, id: id! };
    });
    return { ...recorded, delivery: await this.delivered(id) };
  }

  /** The first attempt of a queued message; given up at once (the platform refused it for good), the caller hears why. */
  private async delivered(id: number) {
    const delivery = await this.deps.outbox.firstAttempt(id, SEND_WAIT_MS);
    if (delivery.status === 'failed') throw new DomainError('unavailable', `${delivery.error ?? 'The platform refused the message'} (outbox ${id}).`);
    return delivery;
  }

  /** A reaction on a message a session recorded (message.react), through the outbox to the conversation (or thread) it came from. */
  async react(input: { channel: string; account?: string; to: string; messageId: string; emoji: string }) {
    const channel = this.channel(input.channel);
    const account = this.account(channel, input.account);
    if (!channel.react) throw new DomainError('invalid', `Channel ${channel.id} has no reactions.`, { code: 'reactions_not_supported' });
    checkEmoji(input.emoji);
    const lookup = (by: { id: number } | { containing: string }) => this.deps.sessions.store.inbound(input.channel, account, by);
    const target = await reactionTarget(lookup, { channel: input.channel, to: input.to, peer: channel.normalizePeer(input.to), messageId: input.messageId });
    const id = await this.deps.outbox.queue({
      channel: input.channel, account, to: target.replyTo ?? input.to, kind: 'reaction', reference: target.reference, text: input.emoji, sessionKey: target.sessionKey,
    });
    return { sessionKey: target.sessionKey, delivery: await this.delivered(id!) };
  }

  /** A workspace file an agent attaches to its reply (message.attach): queued, before the reply, to where the session's latest message came from. */
  async attach(input: { sessionKey: string; agent?: string; file: string; caption: string }) {
    const session = await this.deps.sessions.store.get(input.sessionKey);
    if (!session) throw new DomainError('not_found', `No session ${input.sessionKey}.`);
    const channel = this.channel(session.channel);
    const last = (await this.deps.sessions.store.history(session.key, { limit: 50 })).reverse().find((message) => typeof message.data?.replyTo === 'string');
    const replyTo = last?.data?.replyTo as string | undefined;
    const to = replyTo ?? session.peerName ?? session.peer;
    const file = await workspaceFile(channel, this.workspaceOf(input.agent), input.file);
    const id = await this.deps.outbox.queue({ channel: session.channel, account: session.account, to, text: input.caption, sessionKey: session.key, file });
    return { delivery: await this.delivered(id!), name: file.name, bytes: file.data.length };
  }

  /** Approves a code; with notify, tells the sender. Failures name why the code cannot be approved. */
  async approve(channelId: string, code: string, actor: string, notify: boolean): Promise<PairApproved> {
    this.assertKnown(channelId);
    const outcome = await this.deps.pairing.approve(channelId, code, actor);
    if ('failure' in outcome) {
      if (outcome.failure === 'approved') return { approved: true as const, alreadyApproved: true, ...pairRequestView(outcome.request!), notified: false };
      throw undecided(channelId, code, outcome.failure);
    }
    const { request } = outcome;
    this.deps.emit('channel.pair.resolved', { ...pairRequestView(request), decision: 'approved' }, 'operator.pairing');
    let told: { notified: boolean; notifyError?: string } = { notified: false };
    if (notify) {
      try {
        this.channel(channelId);
        told = await tellApproved(this.deps.outbox, channelId, request);
      } catch (error) {
        told = { notified: false, notifyError: (error as Error).message };
      }
    }
    return { approved: true as const, alreadyApproved: false, ...pairRequestView(request), ...told };
  }

  async reject(channelId: string, code: string, actor: string): Promise<{ rejected: true } & DmPairingRequestView> {
    this.assertKnown(channelId);
    const outcome = await this.deps.pairing.reject(channelId, code, actor);
    if ('failure' in outcome) throw undecided(channelId, code, outcome.failure);
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
