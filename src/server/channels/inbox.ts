/**
 * The inbox: what a channel hands in, admitted and stored before it is
 * acknowledged to its platform. Each channel's messages in the order they
 * came; a redelivery known by the platform's id; a stranger's direct message
 * met with a pairing code (queued in the outbox) under the pairing policy; an
 * allowed sender's message and a room's recorded in their session, with the
 * files the agent is to read, and handed to the listeners (the agents'
 * answers) in the same transaction.
 */
import type { Logger } from 'pino';
import { PAIRING_CODE_TTL_MS } from '../../shared/channels.ts';
import type { ChannelSettings, InboundMessage } from '../kernel/channel.ts';
import { observe, observed, type ChannelMessageObserved } from '../kernel/observe.ts';
import { peerPerson } from '../kernel/person.ts';
import type { Session, SessionMessage } from '../sessions/module.ts';
import type { Db, Tx } from '../store/database.ts';
import type { Fetched } from './attachments.ts';
import { pairRequestView } from './dm-pairing.ts';
import type { Sessions } from '../sessions/module.ts';
import type { Store } from '../store/database.ts';
import type { Attachments } from './attachments.ts';
import type { DmPairing } from './dm-pairing.ts';
import type { InboundMarks } from './inbound-marks.ts';
import type { Outbox } from './outbox/outbox.ts';
import type { AnswerHooks } from './answer-hooks.ts';
import { type Routed, routeOf, sessionAgent } from './routes.ts';

/** A message that reached a session: a direct message from an allowed sender, or one said in a room. */
export interface Inbound {
  channel: string;
  message: InboundMessage;
  session: Session;
  recorded: SessionMessage;
  /** The agent that answers it (channels.<id>.routes, else channels.<id>.agent); absent when none does. */
  agent?: string;
}

/**
 * Told of each message that reaches a session, in the transaction that
 * records it: what it writes there (an agent's answer queued as a job)
 * commits with the message, or not at all.
 */
export type InboundListener = (inbound: Inbound, tx: Tx) => Promise<void> | void;

/** What the inbox works with (the channel manager's own). */
export interface InboxDeps {
  logger: Logger;
  pairing: DmPairing;
  sessions: Sessions;
  store: Store;
  outbox: Outbox;
  marks: InboundMarks;
  attachments: Attachments;
  emit: (event: string, payload: unknown, scope: string) => void;
  /** The answers taken before a message is recorded, and the buttons pressed (answer-hooks.ts). */
  hooks?: AnswerHooks;
}

export class Inbox {
  private readonly listeners: InboundListener[] = [];
  /** Each channel's inbound messages are handled one after another, in the order they came. */
  private readonly queues = new Map<string, Promise<void>>();
  private readonly deps: InboxDeps;
  private readonly settingsOf: (id: string) => ChannelSettings | undefined;
  private readonly normalize: (channel: string, peer: string) => string;

  /** Whether a channel running here has reactions (an acknowledgement is put only there). */
  private readonly reacts: (channel: string) => boolean;

  constructor(deps: InboxDeps, settings: (id: string) => ChannelSettings | undefined, normalize: (channel: string, peer: string) => string, reacts: (channel: string) => boolean = () => false) {
    this.deps = deps;
    this.settingsOf = settings;
    this.normalize = normalize;
    this.reacts = reacts;
  }

  /** Tells a listener of every message that reaches a session (agents answer from here). */
  onInbound(listener: InboundListener): void {
    this.listeners.push(listener);
  }

  /** Resolves once every message handed in so far is handled. */
  async settled(): Promise<void> {
    while (this.queues.size > 0) await Promise.allSettled(this.queues.values());
  }

  /** Whether a sender may reach sessions: config allowFrom ("*" only under open), or the approved list. */
  async isAllowed(channel: string, sender: string, db: Db = this.deps.store): Promise<boolean> {
    const settings = this.settingsOf(channel);
    if (!settings) return false;
    const allowFrom = settings.allowFrom.map((entry) => (entry === '*' ? entry : this.normalize(channel, entry)));
    if (settings.dmPolicy === 'open' && allowFrom.includes('*')) return true;
    return allowFrom.includes(sender) || this.deps.pairing.isAllowed(channel, sender, db);
  }

  /** A sender asks to talk before saying anything (a Matrix invite): see ChannelContext.admit. */
  async admit(channel: string, request: { account: string; sender: string; senderName: string; ask: boolean }): Promise<'allowed' | 'pending' | 'refused'> {
    const policy = this.settingsOf(channel)?.dmPolicy ?? 'disabled';
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
  enqueue(channel: string, message: InboundMessage): Promise<void> {
    // One message that could not be stored holds up none after it.
    const queued = (this.queues.get(channel) ?? Promise.resolve()).catch(() => undefined).then(() => this.inbound(channel, message));
    this.queues.set(channel, queued);
    void queued.catch(() => undefined).then(() => {
      if (this.queues.get(channel) === queued) this.queues.delete(channel);
    });
    return queued;
  }

  private async inbound(channel: string, message: InboundMessage): Promise<void> {
    const log = this.deps.logger.child({ channel, account: message.account, sender: message.sender });
    try {
      // Files are fetched before the transaction (it never waits on a platform), and only for a message the agent is to read.
      let files: Fetched[] = [];
      if (message.attachments?.length) {
        if (message.platformId !== undefined && await this.deps.marks.seen(channel, message.account, message.platformId)) return;
        files = await this.files(channel, message, log);
      }
      await this.deps.store.transaction(async (tx) => {
        // A message the platform delivers again (it was not acknowledged in time) is stored once.
        if (message.platformId !== undefined && !(await this.deps.marks.firstSight(channel, message.account, message.platformId, tx))) {
          log.debug({ platformId: message.platformId }, 'inbound message seen already; dropped');
          return;
        }
        const data = {
          ...(message.platformId ? { platformId: message.platformId } : {}),
          // What a reaction (message.react) and an attached file (message.attach) need to find the message and its conversation.
          ...(message.reference ? { reference: message.reference } : {}),
          ...(message.replyTo ? { replyTo: message.replyTo } : {}),
          ...(files.length ? { attachments: files.map((file) => file.view) } : {}),
        };
        const entry = {
          direction: 'in' as const, sender: message.sender, senderName: message.senderName, person: peerPerson(channel, message.account, message.sender), text: message.text, at: message.at,
          ...(Object.keys(data).length ? { data } : {}),
        };
        // The agent is chosen once, here: the session the message goes to is that agent's.
        const routed = routeOf(this.settingsOf(channel), message, (peer) => this.normalize(channel, peer));
        const agent = sessionAgent(this.settingsOf(channel), routed);
        // Where the message would be recorded; an answer (an approver's words, a person's to their question) is taken before it is.
        const peer = message.kind === 'group' ? (message.thread ? `${message.room!}#${message.thread}` : message.room!) : message.thread ? `${message.sender}#${message.thread}` : message.sender;
        for (const claim of this.deps.hooks?.claims ?? []) {
          if (await claim({ channel, message, session: { kind: message.kind, peer, ...(agent === undefined ? {} : { agent }) } }, tx)) {
            log.debug('inbound message taken as an answer; it reaches no session');
            return;
          }
        }
        const keep = async (recorded: { session: Session; message: SessionMessage }) => {
          await this.deps.attachments.save(channel, message.account, recorded.session.key, files, tx);
          return recorded;
        };
        if (message.kind === 'group') {
          await this.arrived(channel, message, routed, await keep(await this.record(channel, message.account, 'group', peer, message.room!, agent, entry, tx)), tx);
          return;
        }
        const policy = this.settingsOf(channel)?.dmPolicy ?? 'disabled';
        if (policy === 'disabled') {
          log.debug('direct message ignored: the DM policy is disabled');
          return;
        }
        if (await this.isAllowed(channel, message.sender, tx)) {
          await this.arrived(channel, message, routed, await keep(await this.record(channel, message.account, 'direct', peer, message.senderName, agent, entry, tx)), tx);
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
    const settings = this.settingsOf(channel);
    const reads = message.kind === 'group' ? message.addressed !== undefined : settings?.dmPolicy !== 'disabled' && await this.isAllowed(channel, message.sender);
    if (!reads) {
      if (message.kind !== 'group') return [];
      return this.deps.attachments.fetch(attachments, 0, log).then((files) => files.map((file) => ({ view: { ...file.view, note: 'not kept: the message was not addressed to the agent' } })));
    }
    return this.deps.attachments.fetch(attachments, Number(settings?.maxAttachmentBytes ?? 10 * 1024 * 1024), log);
  }

  /**
   * The acknowledgement reaction (channels.<id>.ackReaction) on a message the
   * agent is to read, where the platform has reactions: queued with the
   * message, so it shows once the message is stored. A room's chatter not
   * addressed to the account gets none.
   */
  private async acknowledge(channel: string, message: InboundMessage, sessionKey: string, tx: Tx): Promise<void> {
    const emoji = this.settingsOf(channel)?.ackReaction;
    if (typeof emoji !== 'string' || !emoji || !message.reference || !this.reacts(channel)) return;
    if (message.kind === 'group' && message.addressed === undefined) return;
    await this.deps.outbox.enqueue({
      channel, account: message.account, to: message.replyTo ?? message.room ?? message.sender, kind: 'reaction', reference: message.reference, text: emoji, sessionKey,
      key: `ack:${channel}:${message.account}:${message.reference}`,
    }, tx);
  }

  private record(channel: string, account: string, kind: 'direct' | 'group', peer: string, peerName: string, agent: string | undefined, message: { direction: 'in' | 'out'; sender: string; senderName?: string; person?: string; text: string; at: number; via?: string; data?: Record<string, unknown> }, db?: Db) {
    return this.deps.sessions.record({ channel, account, kind, peer, peerName, ...(agent === undefined ? {} : { agent }), ...message }, db);
  }

  private async arrived(channel: string, message: InboundMessage, routed: Routed, recorded: { session: Session; message: SessionMessage }, tx: Tx): Promise<void> {
    tx.afterCommit(() => observe(observed.channelMessage, (): ChannelMessageObserved => ({ channel, direction: 'in' })));
    await this.acknowledge(channel, message, recorded.session.key, tx);
    const inbound = { channel, message, session: recorded.session, recorded: recorded.message, ...(routed.agent === undefined ? {} : { agent: routed.agent }) };
    for (const listener of this.listeners) await listener(inbound, tx);
  }
}
