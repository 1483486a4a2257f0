/**
 * Answers that come from the chats: a button pressed under an approval
 * request or a question, and, on every channel, an approver's reply
 * "approve 7f3a" / "reject 7f3a" or a person's answer to their question,
 * taken before anything else sees the message (it reaches no session and no
 * agent). Only approvals.approvers may decide; anyone else is told so, and
 * the attempt is audited.
 */
import type { ButtonPress, InboundMessage, PressAnswer } from '../kernel/channel.ts';
import type { Outbox } from '../channels/module.ts';
import type { Store, Tx } from '../store/database.ts';
import { answerText, type ExecApprovals } from './approvals.ts';
import type { OperatorNotices } from './notices.ts';
import type { Questions } from './questions.ts';

/** An approver's answer in words, alone on the message's first line: approve or reject, then the id or its short code. */
const TEXT_ANSWER = /^\s*(approve|reject)\s+(ap_[0-9a-f]{12}|[0-9a-f]{4,12})\s*[.!]?\s*$/i;
const BUTTON = /^ap:([yn]):(ap_[0-9a-f]{12})$/;

const NOT_AN_APPROVER = 'You are not one of this gateway\'s approvers (approvals.approvers): your answer was not taken.';

export interface ChatAnswersDeps {
  store: Store;
  approvals: ExecApprovals;
  questions: Questions;
  notices: OperatorNotices;
  outbox: Pick<Outbox, 'queue'>;
}

export class ChatAnswers {
  private readonly deps: ChatAnswersDeps;
  private refusals = 0;

  constructor(deps: ChatAnswersDeps) {
    this.deps = deps;
  }

  /** Takes a message that is an answer (see InboundClaim), in the transaction that would have recorded it. */
  async claim(channel: string, message: InboundMessage, session: { kind: 'direct' | 'group'; peer: string; agent?: string }, tx: Tx): Promise<boolean> {
    // The first line says it (a mail's signature may follow).
    const words = TEXT_ANSWER.exec(message.text.trim().split('\n')[0] ?? '');
    if (words && await this.answerInWords(channel, message, words[1]!.toLowerCase() === 'approve', words[2]!, tx)) return true;
    return this.deps.questions.claim(channel, message, session, tx);
  }

  private async answerInWords(channel: string, message: InboundMessage, approve: boolean, reference: string, tx: Tx): Promise<boolean> {
    const { approvals, notices } = this.deps;
    const who = `${channel}:${message.sender}`;
    // Where the answer was said, for the word back.
    const place = { channel, account: message.account, to: message.replyTo ?? (message.kind === 'group' ? message.room! : message.senderName) };
    const key = `approval-answer:${channel}:${message.account}:${message.platformId ?? `${Date.now()}.${++this.refusals}`}`;
    if (!notices.isApprover(channel, message.sender)) {
      // Someone else's words are theirs unless they name a request: then they are refused, and told.
      const named = await approvals.named(reference, tx);
      if (!named) return false;
      await this.deps.store.audit('exec.approval.refused', { actor: who, subject: named.id, detail: { via: channel, answer: approve ? 'approve' : 'reject', code: named.code } }, tx);
      await this.deps.outbox.queue({ ...place, text: `${message.senderName}: ${NOT_AN_APPROVER}`, key }, tx);
      return true;
    }
    const decided = await approvals.decide(reference, approve, { by: who, via: channel }, tx);
    // Words that name no request are an ordinary message, an approver's too.
    if (decided.outcome === 'unknown') return false;
    // The chats told of the request hear of its outcome already; elsewhere (a direct message to the gateway) the approver is answered.
    if (decided.outcome === 'decided' && notices.isTarget(notices.targets(), place)) return true;
    await this.deps.outbox.queue({ ...place, text: answerText(decided), key }, tx);
    return true;
  }

  /**
   * A button pressed under an approval request or a question: acted on (in
   * the caller's transaction when it gives one), and what the person who
   * pressed it is shown. Where what they are shown is a message of its own
   * (WhatsApp), a decision's presser in a chat told of the request hears of
   * it with that chat (the outcome's message), once.
   */
  async press(channel: string, press: ButtonPress, tx?: Tx): Promise<PressAnswer | undefined> {
    const button = BUTTON.exec(press.data);
    if (!button) return this.deps.questions.press(channel, press, tx);
    const who = `${channel}:${press.sender}`;
    if (!this.deps.notices.isApprover(channel, press.sender)) {
      await this.deps.store.audit('exec.approval.refused', { actor: who, subject: button[2], detail: { via: channel, answer: button[1] === 'y' ? 'approve' : 'reject' } }, tx);
      return { text: NOT_AN_APPROVER };
    }
    const decided = await this.deps.approvals.decide(button[2]!, button[1] === 'y', { by: who, via: channel }, tx);
    const { notices } = this.deps;
    if (decided.outcome === 'decided' && press.answerTo !== undefined && notices.isTarget(notices.targets(), { channel, account: press.account, to: press.answerTo })) return {};
    return { text: answerText(decided) };
  }
}
