import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
import { describeAttachment } from '../../shared/attachments.ts';
import type { AttachmentView, DelegationNode, DelegationView, MethodResults, OutboxEntryView } from '../../shared/protocol/results.ts';

type History = MethodResults['sessions.history'];

/** How a run's reply to its channel stands: `(sent to alice at ..., ids ...)`, `(waiting: ...)`, `(not delivered: ...)`. */
function describeDelivery(delivery: OutboxEntryView): string {
  const tries = `${delivery.attempts} ${delivery.attempts === 1 ? 'try' : 'tries'}`;
  if (delivery.status === 'sent') {
    return `(sent to ${delivery.to}${delivery.voice ? ' with a voice note' : ''} at ${delivery.sentAt}${delivery.receipts.length ? `, message ${delivery.receipts.join(', ')}` : ''}${delivery.attempts > 1 ? `, after ${tries}` : ''})`;
  }
  if (delivery.status === 'pending') return `(waiting to go to ${delivery.to}: ${tries} so far, next at ${delivery.nextAttemptAt}${delivery.error ? `; last: ${delivery.error}` : ''})`;
  return `(not delivered to ${delivery.to} after ${tries}: ${delivery.error ?? 'given up'})`;
}

/** How a delegation stands: `succeeded, answered at ...`, `running, the answer to come as a new turn`, `failed: ...`. */
function describeDelegation(delegation: DelegationView): string {
  const usage = delegation.usage.inputTokens !== undefined ? `, ${delegation.usage.inputTokens} in / ${delegation.usage.outputTokens ?? '?'} out` : '';
  if (delegation.status === 'running') return `running since ${delegation.createdAt}; the answer ${delegation.wait ? 'is waited for' : 'comes as a new turn'}`;
  if (delegation.status === 'failed') return `failed: ${delegation.error ?? 'unknown'}${delegation.deliveredAt ? '; told to the parent' : ''}`;
  return `succeeded${usage}${delegation.deliveredAt ? `, answered at ${delegation.deliveredAt}` : ''}`;
}

export default class SessionsShow extends BaseCommand<History> {
  static override summary = 'Show a session and its recent messages (exit 5 when there is no such session).';
  static override examples = ['<%= config.bin %> sessions show irc:default:dm:alice', '<%= config.bin %> sessions show "irc:default:group:#ops" --limit 20 --json'];
  static override args = { key: Args.string({ description: 'session key from `sessions list`', required: true }) };
  static override flags = {
    url: BaseCommand.urlFlag,
    limit: Flags.integer({ description: 'the last N messages (1-1000)', default: 200, min: 1, max: 1000 }),
  };

  async run(): Promise<History> {
    const { args, flags } = await this.parse(SessionsShow);
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const result = await client.call('sessions.history', { key: args.key, limit: flags.limit });
    const { session } = result;
    this.say(`${session.key}: ${session.kind === 'group' ? 'room' : 'direct messages with'} ${session.peerName ?? session.peer} on ${session.channel} (${session.messageCount} messages)`);
    const { parent, children } = result.delegation ?? { parent: null, children: [] };
    if (parent) this.say(`  a task agent ${parent.parentAgent} delegated to ${parent.agent} from ${parent.parentSession} (${describeDelegation(parent)})`);
    const tree = (nodes: DelegationNode[], indent: string): void => nodes.forEach((node) => {
      this.say(`${indent}delegated to ${node.agent}: ${node.sessionKey} (${describeDelegation(node)})`);
      tree(node.children, `${indent}  `);
    });
    tree(children, '  ');
    const brief = (value: unknown) => {
      const text = JSON.stringify(value ?? null);
      return text.length > 200 ? `${text.slice(0, 199)}…` : text;
    };
    for (const message of result.messages) {
      const data = message.data ?? {};
      if (message.kind === 'tool_call') {
        this.say(`${message.at}  [${message.sender} calls ${String(data.name)}] ${brief(data.args)}`);
      } else if (message.kind === 'tool_result') {
        this.say(`${message.at}  [${String(data.name)} ${data.error === undefined ? `answers] ${brief(data.result)}` : `fails] ${String(data.error)}`}`);
      } else if (message.kind === 'summary') {
        const covers = data.summarises as { fromId: number; toId: number; count: number; unread?: number } | undefined;
        this.say(`${message.at}  [summary of ${covers?.count ?? '?'} earlier messages, #${covers?.fromId ?? '?'} to #${covers?.toId ?? '?'}, kept in the session${covers?.unread ? `; ${covers.unread} older ones were too many to read` : ''}] ${message.text}`);
      } else if (message.kind === 'error') {
        this.say(`${message.at}  [${message.sender} run ${String(data.status ?? 'failed')}] ${message.text}`);
      } else {
        const who = message.direction === 'in' ? `<${message.senderName ?? message.sender}>` : `-> ${message.sender}:`;
        const usage = data.usage as { inputTokens?: number; outputTokens?: number } | undefined;
        const facts = message.role === 'assistant' && data.model ? `  (${String(data.model)}${usage?.inputTokens !== undefined ? `, ${usage.inputTokens} in / ${usage.outputTokens ?? '?'} out` : ''}${data.latencyMs !== undefined ? `, ${String(data.latencyMs)} ms` : ''})` : '';
        this.say(`${message.at}  ${who} ${message.text}${facts}`);
        for (const file of (data.attachments as AttachmentView[] | undefined) ?? []) this.say(`    ${describeAttachment(file)}`);
        if (message.delivery) this.say(`    ${describeDelivery(message.delivery)}`);
      }
    }
    return result;
  }
}
