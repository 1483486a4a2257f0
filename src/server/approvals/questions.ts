/**
 * The ask tool: an agent asks its person (the conversation's peer, or who
 * spoke in a room) a question on their channel, with buttons where the
 * platform has them and numbered options elsewhere. The run ends there and
 * holds no run slot while the question waits, in the store: the person's
 * answer (a button, or their next message in the conversation, which then
 * reaches no agent as a turn), or the end of its time (its stated default),
 * becomes the tool's result in the session, and the run resumes as a new
 * run of the session from there, once (a job, queued with the answer). A
 * daemon that stops in between loses nothing: the question, its timeout and
 * the resumption are all in the store.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { GatewayConfig } from '../../shared/config/types.ts';
import type { ButtonPress, PressAnswer } from '../kernel/channel.ts';
import { DomainError, RunSuspended } from '../kernel/errors.ts';
import type { ToolDef } from '../kernel/module.ts';
import { peerPerson } from '../kernel/person.ts';
import type { AnswerHooks, Outbox } from '../channels/module.ts';
import type { JobQueue } from '../jobs/module.ts';
import type { Sessions } from '../sessions/module.ts';
import type { Db, Store, Tx } from '../store/database.ts';
import { pruneRows } from '../store/retention.ts';
import { clock } from './notices.ts';

/** The job that ends a question whose time ran out (queued with the question, to run then). */
export const ASK_TIMEOUT_JOB = 'ask.timeout';

type Row = Record<string, string | number | bigint | null>;

/** A question's answer as the tool's result. */
interface Answer {
  answer: string | null;
  /** The option chosen (1-based), when the answer is one of them. */
  option?: number;
  answeredBy?: string;
  timedOut?: true;
  note?: string;
}

export interface QuestionsDeps {
  store: Store;
  config: () => GatewayConfig;
  sessions: Pick<Sessions, 'store' | 'append'>;
  channels: Pick<AnswerHooks, 'hasButtons' | 'editsButtons'>;
  outbox: Pick<Outbox, 'queue' | 'byKey'>;
  jobs: Pick<JobQueue, 'enqueue'>;
  /** Queues the run that resumes a conversation after its question, in the caller's transaction. */
  resume: (question: { id: string; agent: string; sessionKey: string; channel: string; account: string; to: string; sender: string }, tx: Tx) => Promise<void>;
  logger: Logger;
  now?: () => number;
}

const MAX_OPTIONS = 10;

/** The question as the person reads it: the options numbered where there are no buttons, and what happens without an answer. */
function questionText(question: string, options: string[], fallback: string | undefined, expiresAt: number, buttons: boolean): string {
  const lines = [question];
  if (options.length && !buttons) lines.push(...options.map((option, index) => `${index + 1}. ${option}`), 'Reply with a number, or in your own words.');
  lines.push(fallback === undefined ? `(I will wait for your answer until ${clock(expiresAt)}.)` : `(If I hear nothing by ${clock(expiresAt)}, I will go with: ${fallback}.)`);
  return lines.join('\n');
}

/** A person's words as an answer: an option by its number or its words, else the words themselves. */
export function answerOf(text: string, options: readonly string[]): { answer: string; option?: number } {
  const words = text.trim();
  const number = /^\s*(\d{1,2})\s*[.)]?\s*$/.exec(words);
  if (number && Number(number[1]) >= 1 && Number(number[1]) <= options.length) return { answer: options[Number(number[1]) - 1]!, option: Number(number[1]) };
  const index = options.findIndex((option) => option.trim().toLowerCase() === words.toLowerCase());
  return index >= 0 ? { answer: options[index]!, option: index + 1 } : { answer: words };
}

export class Questions {
  private readonly deps: QuestionsDeps;
  private readonly now: () => number;

  constructor(deps: QuestionsDeps) {
    this.deps = deps;
    this.now = deps.now ?? Date.now;
  }

  /** The ask tool. */
  tool(): ToolDef {
    return {
      name: 'ask',
      description: 'Ask the person you are talking with a question and wait for their answer (buttons for the options where their app has them). '
        + 'Your run ends here and resumes with their answer as this tool\'s result; if they do not answer in time, with `default` (say what you will do then). '
        + 'Only in a conversation on a channel.',
      inputSchema: {
        type: 'object', additionalProperties: false, required: ['question'],
        properties: {
          question: { type: 'string', minLength: 1, maxLength: 2000 },
          options: { type: 'array', items: { type: 'string', minLength: 1, maxLength: 80 }, maxItems: MAX_OPTIONS, description: 'the answers to choose from (their own words are taken too)' },
          default: { type: 'string', minLength: 1, maxLength: 200, description: 'the answer taken when none comes in time (said to the person)' },
        },
      },
      handler: (args, context) => this.ask(args, context),
    };
  }

  private async ask(args: Record<string, unknown>, context: Parameters<ToolDef['handler']>[1]): Promise<never> {
    const { sessionKey, runId, callId, agent, person } = context;
    if (context.surface !== 'agent' || !sessionKey || !runId || !callId || !agent) throw new DomainError('invalid', 'The ask tool is for an agent\'s run in a conversation: it waits for the person\'s answer.');
    const session = await this.deps.sessions.store.get(sessionKey);
    if (!session || !this.deps.config().channels[session.channel] || !person.startsWith(`peer:${session.channel}:${session.account}:`)) {
      throw new DomainError('invalid', `The ask tool reaches people on channels only; this conversation (${sessionKey}) is not with a person on a channel. Ask in your answer instead.`);
    }
    const question = String(args.question);
    const options = Array.isArray(args.options) ? args.options.map(String) : [];
    const fallback = typeof args.default === 'string' ? args.default : undefined;
    const id = `q_${randomBytes(6).toString('hex')}`;
    const now = this.now();
    const expiresAt = now + this.deps.config().tools.ask.timeoutSeconds * 1000;
    // Where the conversation's answers go (a chat, a thread), else its peer or room.
    const to = context.replyTo ?? session.peer.split('#')[0]!;
    const buttons = this.deps.channels.hasButtons(session.channel);
    await this.deps.store.transaction(async (tx) => {
      await tx.run(`INSERT INTO agent_questions (id, session_key, run_id, call_id, agent, person, channel, account, recipient, question, options, default_answer, asked_at, expires_at, status)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending')`, id, sessionKey, runId, callId, agent, person, session.channel, session.account, to, question,
      options.length ? JSON.stringify(options) : null, fallback ?? null, now, expiresAt);
      await this.deps.outbox.queue({
        channel: session.channel, account: session.account, to, text: questionText(question, options, fallback, expiresAt, buttons), key: `question:${id}`, sessionKey,
        ...(options.length ? { buttons: options.map((option, index) => ({ label: option, data: `q:${id}:${index + 1}` })) } : {}),
      }, tx);
      await this.deps.jobs.enqueue({ kind: ASK_TIMEOUT_JOB, payload: { id }, source: `ask:${id}`, runAt: expiresAt, maxAttempts: 10 }, tx);
    });
    context.logger.info({ question: id, session: sessionKey }, 'agent asked its person a question; the run ends until the answer');
    throw new RunSuspended({ waiting: true, question: id, expiresAt: new Date(expiresAt).toISOString() });
  }

  /** A person's message: the answer to their question waiting in this conversation, if there is one (it then reaches no agent). */
  async claim(channel: string, message: { account: string; sender: string; text: string }, session: { kind: 'direct' | 'group'; peer: string; agent?: string }, tx: Tx): Promise<boolean> {
    if (!message.text.trim()) return false;
    const key = this.deps.sessions.store.keyOf({ channel, account: message.account, kind: session.kind, peer: session.peer, ...(session.agent ? { agent: session.agent } : {}) });
    const row = await tx.get<Row>("SELECT * FROM agent_questions WHERE person = ? AND session_key = ? AND status = 'pending' ORDER BY asked_at DESC LIMIT 1",
      peerPerson(channel, message.account, message.sender), key);
    if (!row) return false;
    const chosen = answerOf(message.text, optionsOf(row));
    await this.settle(row, 'answered', { ...chosen, answeredBy: `${channel}:${message.sender}` }, `${channel}:${message.sender}`, channel, tx);
    return true;
  }

  /** A button under a question pressed: the answer, if the person asked pressed it (in the caller's transaction when it gives one). */
  async press(channel: string, press: ButtonPress, db?: Tx): Promise<PressAnswer | undefined> {
    const match = /^q:(q_[0-9a-f]{12}):(\d{1,2})$/.exec(press.data);
    if (!match) return undefined;
    const work = async (tx: Tx): Promise<PressAnswer> => {
      const row = await tx.get<Row>('SELECT * FROM agent_questions WHERE id = ?', match[1]);
      if (!row) return { text: 'This question is no longer open.' };
      if (peerPerson(channel, press.account, press.sender) !== String(row.person)) return { text: 'This question is for someone else.' };
      const option = Number(match[2]);
      const answer = optionsOf(row)[option - 1];
      if (answer === undefined) return { text: 'That is not one of the answers.' };
      const by = `${channel}:${press.sender}`;
      if (!(await this.settle(row, 'answered', { answer, option, answeredBy: by }, by, channel, tx))) {
        const now = await tx.get<Row>('SELECT status, answer FROM agent_questions WHERE id = ?', match[1]);
        return { text: now?.status === 'expired' ? 'Too late: the question\'s time ran out.' : `Already answered: ${String(now?.answer ?? '')}` };
      }
      return { text: `Got it: ${answer}` };
    };
    return db ? work(db) : this.deps.store.transaction(work);
  }

  /** A question's time ran out (its job): its stated default stands, unless an answer came first. */
  async timeout(payload: unknown): Promise<Record<string, unknown>> {
    const id = String((payload as { id?: unknown } | null)?.id ?? '');
    return this.deps.store.transaction(async (tx) => {
      const row = await tx.get<Row>('SELECT * FROM agent_questions WHERE id = ?', id);
      if (!row || row.status !== 'pending') return { question: id, already: row ? String(row.status) : 'gone' };
      const fallback = row.default_answer === null ? null : String(row.default_answer);
      const note = fallback === null ? `No answer came within the time (${clock(Number(row.expires_at))}), and no default was given.`
        : `No answer came within the time (${clock(Number(row.expires_at))}): the stated default stands.`;
      await this.settle(row, 'expired', { answer: fallback, timedOut: true, note }, 'gateway', 'timeout', tx);
      return { question: id, timedOut: true };
    });
  }

  /**
   * Ends a question once (the first answer, or the timeout): its result
   * recorded in the session as the ask call's, the question's message edited
   * (its buttons gone) or followed, and the run's resumption queued.
   */
  private async settle(row: Row, status: 'answered' | 'expired', result: Answer, by: string, via: string, tx: Tx): Promise<boolean> {
    const id = String(row.id);
    const now = this.now();
    const { changes } = await tx.run("UPDATE agent_questions SET status = ?, answer = ?, answered_by = ?, answered_via = ?, answered_at = ? WHERE id = ? AND status = 'pending'",
      status, result.answer, by, via, now, id);
    if (changes === 0) return false;
    const sessionKey = String(row.session_key);
    await this.deps.sessions.append(sessionKey, {
      direction: 'in', sender: 'ask', text: '', at: now, role: 'tool', messageKind: 'tool_result', runId: String(row.run_id), via: `agent:${String(row.agent)}`,
      data: { id: String(row.call_id), name: 'ask', result },
    }, tx);
    await this.follow(row, status === 'expired'
      ? `${String(row.question)}\n(No answer in time${result.answer === null ? '.' : `; I went with: ${result.answer}.`})`
      : `${String(row.question)}\n(Answered: ${result.answer})`, status === 'expired', tx);
    const person = String(row.person);
    await this.deps.resume({
      id, agent: String(row.agent), sessionKey, channel: String(row.channel), account: String(row.account), to: String(row.recipient),
      sender: person.split(':').slice(3).join(':'),
    }, tx);
    return true;
  }

  /** The question's message edited to say how it ended, its buttons gone; where it cannot be edited, a message says so only when the time ran out. */
  private async follow(row: Row, text: string, expired: boolean, db: Db): Promise<void> {
    const channel = String(row.channel);
    const told = await this.deps.outbox.byKey(`question:${String(row.id)}`, db);
    const messageId = told?.status === 'sent' ? told.receipts.at(-1) : undefined;
    const editable = messageId !== undefined && this.deps.channels.editsButtons(channel);
    if (!editable && !expired) return;
    await this.deps.outbox.queue({
      channel, account: String(row.account), to: String(row.recipient), text, key: `question-done:${String(row.id)}`, sessionKey: String(row.session_key),
      ...(editable ? { editOf: messageId, buttons: [] } : {}),
    }, db);
  }

  async prune(retentionMs: number): Promise<number> {
    return pruneRows(this.deps.store, 'agent_questions', 'id', "status <> 'pending' AND asked_at < ?", this.now() - retentionMs);
  }
}

function optionsOf(row: Row): string[] {
  try {
    return row.options ? JSON.parse(String(row.options)) as string[] : [];
  } catch {
    return [];
  }
}
