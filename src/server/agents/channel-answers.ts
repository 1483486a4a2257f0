/**
 * An agent's answers on channels. The agent a route of channels.<id>.routes
 * names, else channels.<id>.agent, answers direct messages from approved
 * senders, and rooms when addressed by its nick ("gw: ..." or "gw, ..."); a
 * sender over runtime.senderLimit is told once and then not answered until
 * the window passes.
 *
 * A message to answer is a job, queued in the transaction that records the
 * message; the answer goes to the channel's outbox. A daemon that stops
 * mid-run answers on its next start (or another daemon of a shared store
 * does), and the reply goes out once. The recipient sees the reply being
 * written (typing), and with channels.<id>.streaming, as it is written.
 */
import type { Logger } from 'pino';
import type { GatewayConfig } from '../../shared/config/types.ts';
import { WindowCounter } from '../auth/throttle.ts';
import type { ChannelManager, Inbound } from '../channels/module.ts';
import type { JobQueue } from '../jobs/module.ts';
import { toDomainError } from '../kernel/errors.ts';
import { peerPerson } from '../kernel/person.ts';
import type { Tx } from '../store/database.ts';
import type { AgentRunRequest } from './agent-runner.ts';
import type { RunOutcome } from './runtime.ts';
import type { VoiceNotes } from './voice-notes.ts';

/** The job that answers a channel message: queued with the message, in the transaction that records it. */
export const CHANNEL_ANSWER_JOB = 'channel.answer';
/** Tries of an answer's job (a voice engine that is down is tried again until the last). */
const ANSWER_ATTEMPTS = 5;
/** A typing indicator lasts about 5 s on the apps that show one. */
const TYPING_EVERY_MS = 4000;

export interface AnswerJob {
  channel: string;
  account: string;
  agentId: string;
  sessionKey: string;
  recordedId: number;
  text: string;
  to: string;
  sender: { id: string; name: string };
  /**
   * The run resumes the session after the question (its id) an earlier run
   * asked with ask: no new turn, the answer is in the session as the call's
   * result; its reply goes out once under the question's key.
   */
  resume?: string;
}

export interface ChannelAnswersDeps {
  config: () => GatewayConfig;
  channels: Pick<ChannelManager, 'selfName' | 'reply' | 'answered' | 'typing' | 'stream'>;
  run: (request: AgentRunRequest) => Promise<RunOutcome>;
  jobs: Pick<JobQueue, 'enqueue'>;
  /** Voice notes heard before the agent runs, answers spoken back (voice-notes.ts). */
  voice?: VoiceNotes;
  log: Logger;
  now?: () => number;
  typingEveryMs?: number;
}

/** The text of a room message addressed to a nick ("gw: ...", "gw, ..."), or undefined when it is not addressed to it. */
export function addressedTo(nick: string | undefined, text: string): string | undefined {
  const addressed = nick ? new RegExp(`^\\s*${nick.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\s*[:,]\\s*`, 'i').exec(text) : null;
  return addressed ? text.slice(addressed[0].length) : undefined;
}

export class ChannelAnswers {
  private readonly deps: ChannelAnswersDeps;
  private readonly now: () => number;
  /** Messages each sender sent in the window (runtime.senderLimit). */
  private spent: WindowCounter | undefined;

  constructor(deps: ChannelAnswersDeps) {
    this.deps = deps;
    this.now = deps.now ?? Date.now;
  }

  /** Decides whether a message that reached a session is answered, and queues its answer in the transaction that records it. */
  async inbound({ channel, message, session, recorded, agent: agentId }: Inbound, tx: Tx): Promise<void> {
    const { config, channels, log } = this.deps;
    // Chosen by the channel as it recorded the message (channels.<id>.routes, else channels.<id>.agent).
    if (!agentId) return;
    let text = message.text;
    // Where the channel says a reply goes (a Slack thread, a Telegram chat), else the room or the sender's name.
    const to = message.replyTo ?? (message.kind === 'group' ? message.room! : message.senderName);
    if (message.kind === 'group' && message.addressed) {
      text = message.addressed.text;
    } else if (message.kind === 'group') {
      const addressed = addressedTo(channels.selfName(channel, message.account), text);
      if (addressed === undefined || !addressed.trim()) return;
      text = addressed;
    }
    const { max, windowMs } = config().runtime.senderLimit;
    const key = `${channel}\n${message.sender}`;
    const now = this.now();
    // The window is read live: a new one starts the counts again.
    if (this.spent?.windowMs !== windowMs) this.spent = new WindowCounter(windowMs);
    const budget = this.spent.hit(key, now);
    if (budget.count > max) {
      // The sender is told once, at the first message over the limit.
      if (budget.count === max + 1) {
        const minutes = Math.ceil((budget.endsAt - now) / 60_000);
        await channels.reply({ channel, account: message.account, to, text: `${message.senderName}: you have reached ${max} messages for now; I will answer again in about ${minutes} minutes.` }, tx);
      }
      log.info({ channel, sender: message.sender }, 'sender over the per-sender limit; not answered');
      return;
    }
    const job: AnswerJob = {
      channel, account: message.account, agentId, sessionKey: session.key, recordedId: recorded.id, to,
      text: message.kind === 'group' ? `${message.senderName}: ${text}` : text, sender: { id: message.sender, name: message.senderName },
    };
    await this.deps.jobs.enqueue({ kind: CHANNEL_ANSWER_JOB, payload: job, source: `channel:${channel}`, maxAttempts: ANSWER_ATTEMPTS }, tx);
  }

  /** Runs an answer's job: the agent's run, its reply (streamed where the channel can) to the outbox once, an apology when it failed. */
  async answer(payload: unknown, { attempt }: { attempt: number }): Promise<Record<string, unknown>> {
    const { channels, log } = this.deps;
    const job = payload as AnswerJob;
    // An earlier attempt that answered and then lost its daemon before it could say so: the answer stands.
    if (attempt > 1 && !job.resume && await channels.answered(job.sessionKey, job.recordedId)) return { answered: 'by an earlier attempt' };
    // The recipient sees the reply being written (where the channel can show it), refreshed before it fades.
    void channels.typing(job.channel, job.account, job.to);
    const typing = setInterval(() => void channels.typing(job.channel, job.account, job.to), this.deps.typingEveryMs ?? TYPING_EVERY_MS);
    // With channels.<id>.streaming, the reply shows as it is written, in one message the final text then replaces.
    const stream = channels.stream(job.channel, job.account, job.to);
    try {
      // Voice notes are heard first: the agent reads the person's words.
      const hearing = job.resume ? undefined : await this.deps.voice?.hear(job, attempt >= ANSWER_ATTEMPTS);
      if (hearing?.unheard.length) {
        await channels.reply({ channel: job.channel, account: job.account, to: job.to, text: hearing.unheard.join('\n'), key: `unheard:${job.sessionKey}:${job.recordedId}`, sessionKey: job.sessionKey });
      }
      if (hearing && !hearing.says) {
        clearInterval(typing);
        await stream?.finish();
        return { unheard: hearing.unheard };
      }
      const result = await this.deps.run({
        agentId: job.agentId, session: { key: job.sessionKey }, text: job.text, surface: 'channel', sender: job.sender, replyTo: job.to,
        ...(job.resume ? { resume: true } : { recordedId: job.recordedId }),
        // In a room too: the person who spoke the message answered, never the room.
        person: peerPerson(job.channel, job.account, job.sender.id),
        ...(stream ? { onEvent: (event: { type: string; text?: string }) => { if (event.type === 'delta') stream.push(event.text!); } } : {}),
      });
      clearInterval(typing);
      const editOf = await stream?.finish();
      if (!result.text.trim()) return { runId: result.runId, status: result.status, replied: false };
      // Spoken back (channels.<id>.voiceReplies) as a voice note with the text.
      const voice = this.deps.voice?.speaks(job.channel, hearing?.spoken ?? false) ? await this.deps.voice.speak(job, result.text) : undefined;
      // Merged turns (the collect queue mode) share one run, and its answer goes out once.
      await channels.reply({
        channel: job.channel, account: job.account, to: job.to, text: result.text, key: job.resume ? `resume:${job.resume}` : `run:${result.runId}`, sessionKey: job.sessionKey, runId: result.runId,
        ...(job.resume ? {} : { turnId: job.recordedId }), ...(editOf ? { editOf } : {}), ...(voice ? { voice } : {}),
      });
      return { runId: result.runId, status: result.status, replied: true };
    } catch (error) {
      clearInterval(typing);
      const editOf = await stream?.finish();
      const { error: failure } = toDomainError(error);
      // The daemon is stopping: the next one (or another daemon) answers.
      if (failure.code === 'run_interrupted' || failure.retryable) throw error;
      log.warn({ channel: job.channel, agent: job.agentId, error: failure.message }, 'agent could not answer a channel message');
      if (failure.code === 'run_aborted') return { aborted: failure.message };
      // At a spending cap the person is told plainly, and when it lifts; the operator hears of it through approvals.notify.
      const resetsAt = failure.code === 'budget_exceeded' ? (failure.details as { resetsAt?: string } | undefined)?.resetsAt : undefined;
      const text = failure.code === 'budget_exceeded'
        ? `Sorry, I cannot answer now: I have reached the spending limit my operator set${resetsAt ? `, until ${resetsAt.slice(0, 16).replace('T', ' ')} UTC` : ''}. The operator has been told.`
        : 'Sorry, I could not answer that just now; please try again later.';
      await channels.reply({
        channel: job.channel, account: job.account, to: job.to, text,
        key: job.resume ? `unanswered:resume:${job.resume}` : `unanswered:${job.sessionKey}:${job.recordedId}`, sessionKey: job.sessionKey,
        ...(job.resume ? {} : { turnId: job.recordedId }), ...(editOf ? { editOf } : {}),
      });
      return { failed: failure.message };
    }
  }
}
