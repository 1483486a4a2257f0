/**
 * The operator's chats: where approval requests, their outcomes and budget
 * notices go (`approvals.notify`, each target through its channel's outbox,
 * so a message waits for a channel that is down), and who may answer from a
 * chat (`approvals.approvers`, senders as pairing names them).
 */
import type { Logger } from 'pino';
import type { GatewayConfig } from '../../shared/config/types.ts';
import type { ApprovalNoticeView } from '../../shared/protocol/results.ts';
import type { ChannelButton } from '../kernel/channel.ts';
import type { AnswerHooks, ChannelManager, Outbox } from '../channels/module.ts';
import type { Db } from '../store/database.ts';

/** Where an operator's message goes: a channel's account and a recipient as the channel takes it. */
export interface NotifyTarget {
  channel: string;
  account: string;
  to: string;
}

export interface OperatorNoticesDeps {
  config: () => GatewayConfig;
  channels: Pick<ChannelManager, 'normalizePeer'> & Pick<AnswerHooks, 'hasButtons' | 'editsButtons'>;
  outbox: Pick<Outbox, 'queue' | 'byKey'>;
  logger: Logger;
}

export class OperatorNotices {
  private readonly deps: OperatorNoticesDeps;

  constructor(deps: OperatorNoticesDeps) {
    this.deps = deps;
  }

  /** The targets of approvals.notify now, each with its account (the channel's default when it names none). */
  targets(): NotifyTarget[] {
    return this.deps.config().approvals.notify.map((target) => ({ channel: target.channel, account: target.account ?? 'default', to: target.to }));
  }

  /** Whether a channel's sender may answer approval requests: approvals.approvers names them (`<channel>:<sender>`, folded as the channel folds senders). */
  isApprover(channel: string, sender: string): boolean {
    return this.deps.config().approvals.approvers.some((entry) => {
      const colon = entry.indexOf(':');
      return colon > 0 && entry.slice(0, colon) === channel && this.deps.channels.normalizePeer(channel, entry.slice(colon + 1)) === sender;
    });
  }

  /** Whether a place (a channel's account and recipient) is one of these targets: it hears of an outcome there already. */
  isTarget(targets: readonly NotifyTarget[], place: NotifyTarget): boolean {
    const fold = (target: NotifyTarget) => `${target.channel}\n${target.account}\n${this.deps.channels.normalizePeer(target.channel, target.to)}`;
    return targets.some((target) => fold(target) === fold(place));
  }

  /** Whether a channel's messages carry buttons (else a message says how to answer in words). */
  hasButtons(channel: string): boolean {
    return this.deps.channels.hasButtons(channel);
  }

  /** Queues a message to each target, under `<key>:<n>` (each once, however often this is called); its text may differ per target. */
  async tell(targets: readonly NotifyTarget[], key: string, text: string | ((target: NotifyTarget) => string), db: Db, buttons?: ChannelButton[]): Promise<void> {
    for (const [index, target] of targets.entries()) {
      await this.deps.outbox.queue({ ...target, text: typeof text === 'string' ? text : text(target), key: `${key}:${index}`, ...(buttons ? { buttons } : {}) }, db);
    }
  }

  /** How each target was told under `key` (as tell() queued it): sent, waiting and why (outside WhatsApp's window, a channel down), or given up and why. */
  async told(targets: readonly NotifyTarget[], key: string): Promise<ApprovalNoticeView[]> {
    const told: ApprovalNoticeView[] = [];
    for (const [index, target] of targets.entries()) {
      const entry = await this.deps.outbox.byKey(`${key}:${index}`);
      if (entry) told.push({ ...target, status: entry.status, ...(entry.status !== 'sent' && entry.error ? { error: entry.error } : {}) });
    }
    return told;
  }

  /**
   * Tells each target what became of what it was told under `told`: the
   * message edited in place, its buttons taken away, where it was sent and
   * the platform edits; a new message otherwise (WhatsApp, IRC).
   */
  async follow(targets: readonly NotifyTarget[], told: string, key: string, text: string, db: Db): Promise<void> {
    for (const [index, target] of targets.entries()) {
      const earlier = await this.deps.outbox.byKey(`${told}:${index}`, db);
      const messageId = earlier?.status === 'sent' ? earlier.receipts.at(-1) : undefined;
      const edit = messageId !== undefined && this.deps.channels.editsButtons(target.channel) ? { editOf: messageId, buttons: [] } : {};
      await this.deps.outbox.queue({ ...target, text, key: `${key}:${index}`, ...edit }, db);
    }
  }
}

/** A command as it is shown in a chat: its hidden characters escaped (by the caller), set apart as code. */
export function codeSpan(text: string): string {
  const longest = Math.max(0, ...[...text.matchAll(/`+/g)].map((run) => run[0].length));
  const fence = '`'.repeat(longest + 1);
  return longest ? `${fence} ${text} ${fence}` : `${fence}${text}${fence}`;
}

/** A time as people read it in a chat: hours and minutes, UTC. */
export const clock = (ms: number): string => `${new Date(ms).toISOString().slice(11, 16)} UTC`;
