/**
 * The operator in control, in the chats they already have open: commands
 * waiting for an approval (approvals.ts), told with buttons or words to
 * approvals.notify's chats and answered there by approvals.approvers, or
 * from the CLI and the Control UI, the first answer winning in the store
 * (chat-answers.ts, notices.ts); the ask tool, with which an agent asks its
 * person a question without holding a run slot while it waits
 * (questions.ts); and budget notices sent to the same chats.
 *
 * setup() wires those parts: the RPC methods, the tool, the job, the claims
 * on inbound messages and the button presses of the channels.
 */
import type { ExecApprovalView } from '../../shared/protocol/results.ts';
import agentsModule, { CHANNEL_ANSWER_JOB, type AnswerJob } from '../agents/module.ts';
import channelsModule from '../channels/module.ts';
import jobsModule from '../jobs/module.ts';
import { DomainError } from '../kernel/errors.ts';
import { defineModule, type RpcClient } from '../kernel/module.ts';
import sessionsModule from '../sessions/module.ts';
import { answerText, ExecApprovals } from './approvals.ts';
import { ChatAnswers } from './chat-answers.ts';
import { OperatorNotices } from './notices.ts';
import { ASK_TIMEOUT_JOB, Questions } from './questions.ts';
import { APPROVAL_MIGRATIONS } from './tables.ts';

export type { ApprovalRequest, Decision, ExecApprovals } from './approvals.ts';

/** What other modules get from this one. */
export interface OperatorControl {
  approvals: ExecApprovals;
}

/** The event a daemon sharing a PostgreSQL store publishes once it decided a request another daemon may wait on. */
const DECIDED_EVENT = 'approval.decided';

/** Through what a device answered: the CLI, the Control UI, or the client it says it is. */
const viaOf = (client: RpcClient): string => (client.clientId === 'gateway-cli' ? 'cli' : client.clientId);

export default defineModule<OperatorControl>({
  id: 'approvals',
  needs: [jobsModule, sessionsModule, channelsModule, agentsModule],
  migrations: APPROVAL_MIGRATIONS,
  async setup(ctx) {
    const { store } = ctx;
    const { outbox, hooks } = ctx.use(channelsModule);
    const sessions = ctx.use(sessionsModule);
    const { queue, retention } = ctx.use(jobsModule);
    const notices = new OperatorNotices({ config: ctx.config, channels: { normalizePeer: (channel, peer) => ctx.use(channelsModule).channels.normalizePeer(channel, peer), hasButtons: (channel) => hooks.hasButtons(channel), editsButtons: (channel) => hooks.editsButtons(channel) }, outbox, logger: ctx.log });

    const approvals = new ExecApprovals({
      store, daemon: ctx.daemon.instanceId, notices, logger: ctx.log, shared: store.coordinator !== undefined,
      tell: (event, approval) => ctx.events.emit('exec.approval', { event, approval }, 'operator.read'),
      publish: store.coordinator ? (id) => store.coordinator?.publish(DECIDED_EVENT, { id }, 'internal') : undefined,
    });
    store.coordinator?.onEvent((event, payload) => {
      if (event === DECIDED_EVENT) void approvals.heard(String((payload as { id?: unknown } | null)?.id ?? ''));
    });
    ctx.onStart(async () => {
      const left = await approvals.interruptLeftovers();
      if (left > 0) ctx.log.warn({ approvals: left }, 'commands a stopped daemon left waiting for approval ended unanswered');
    });
    ctx.onStop(() => approvals.close());
    // A chat told of requests, or an approver, on a channel that is not configured would never hear or be heard.
    ctx.configCheck((next) => [
      ...next.approvals.notify.map((target, index) => ({ key: `approvals.notify[${index}].channel`, channel: target.channel })),
      ...next.approvals.approvers.map((entry, index) => ({ key: `approvals.approvers[${index}]`, channel: entry.slice(0, entry.indexOf(':')) })),
    ].filter(({ channel }) => !next.channels[channel]).map(({ key, channel }) => `${key}: no channel ${channel} is configured (gateway config set channels.${channel} ...)`));
    retention('execApprovals', (retentionMs) => approvals.prune(retentionMs));

    ctx.rpc.method({ name: 'approvals.list', handler: async () => ({ approvals: await approvals.list() }) });
    ctx.rpc.method({
      name: 'approvals.decide',
      handler: async ({ id, approve }, client): Promise<ExecApprovalView> => {
        const decided = await approvals.decide(id, approve, { by: `device:${client.deviceId}`, via: viaOf(client), address: client.address });
        if (decided.outcome === 'decided') return decided.view;
        if (decided.outcome === 'ambiguous') throw new DomainError('invalid', answerText(decided));
        if (decided.outcome === 'late' && decided.view.status !== 'expired') {
          throw new DomainError('conflict', answerText(decided), { code: 'already_decided', details: { id: decided.view.id, status: decided.view.status, decidedBy: decided.view.decidedBy, decidedVia: decided.view.decidedVia } });
        }
        throw new DomainError('not_found', `No command waits for approval as ${id} (it was decided, or its time ran out): gateway approvals list`);
      },
    });

    // The ask tool: a run waits for its person's answer without holding a slot, and resumes as a channel answer job.
    const questions = new Questions({
      store, config: ctx.config, sessions, channels: hooks, outbox, jobs: queue, logger: ctx.log,
      resume: async (question, tx) => {
        const job: AnswerJob = {
          channel: question.channel, account: question.account, agentId: question.agent, sessionKey: question.sessionKey, recordedId: 0, text: '', to: question.to,
          sender: { id: question.sender, name: question.sender }, resume: question.id,
        };
        await queue.enqueue({ kind: CHANNEL_ANSWER_JOB, payload: job, source: `ask:${question.id}`, maxAttempts: 5 }, tx);
      },
    });
    ctx.tools.add(questions.tool());
    ctx.jobs.handle(ASK_TIMEOUT_JOB, (payload) => questions.timeout(payload));
    retention('agentQuestions', (retentionMs) => questions.prune(retentionMs));

    // Answers from the chats: button presses, and words taken before they reach a session.
    const answers = new ChatAnswers({ store, approvals, questions, notices, outbox });
    hooks.onClaim(({ channel, message, session }, tx) => answers.claim(channel, message, session, tx));
    hooks.onPress((channel, press, tx) => answers.press(channel, press, tx));

    // A budget's warning and its cap reached go to the operator's chats too, once (the daemon that recorded the notice tells it).
    ctx.events.on('budget.notice', (payload) => {
      const notice = payload as { key?: string; text?: string };
      const targets = notices.targets();
      if (!notice.key || !notice.text || targets.length === 0) return;
      store.transaction((tx) => notices.tell(targets, `budget:${notice.key}`, notice.text!, tx))
        .catch((error: unknown) => ctx.log.warn({ err: error }, 'a budget notice could not be queued for approvals.notify'));
    });

    return { approvals };
  },
});
