/**
 * Delegation: an agent hands a task to another (the tool agents.delegate).
 * The child's run is a job with a session of its own,
 * `delegate:<parent session>:<n>`, queued in the transaction that records the
 * delegation and the task. With `wait`, the tool call waits for the answer (up
 * to agents.<id>.delegation.timeoutSeconds); otherwise, or once the wait is
 * over, the answer comes back as a new turn of the parent's conversation, run
 * by the parent agent as a job of its own (on a channel, answered to the
 * channel's peer through the outbox). The row that ends a delegation is
 * written once, by the attempt that ends it, in the transaction that hands its
 * answer back: a daemon killed while a child runs finishes the child after the
 * restart (or another daemon of a shared store does), and its answer is handed
 * back once. A child that fails hands back its failure.
 */
import type { Logger } from 'pino';
import { SESSION_SOURCES } from '../../shared/channels.ts';
import type { GatewayConfig } from '../../shared/config/types.ts';
import type { DelegationNode, SessionDelegations } from '../../shared/protocol/results.ts';
import type { Outbox } from '../channels/module.ts';
import type { JobQueue } from '../jobs/module.ts';
import { DomainError, toDomainError } from '../kernel/errors.ts';
import type { ToolContext, ToolDef } from '../kernel/registration.ts';
import type { Sessions } from '../sessions/module.ts';
import type { Db, Store } from '../store/database.ts';
import type { AgentRunRequest } from './agent-runner.ts';
import { type AnswerJob, CHANNEL_ANSWER_JOB } from './channel-answers.ts';
import { type Delegation, type DelegationOutcome, type DelegationStore, delegationView } from './delegation-store.ts';
import type { RunOutcome } from './runtime.ts';

/** The job that runs a child: queued with the delegation. */
export const DELEGATE_JOB = 'agent.delegate';
/** The job that runs the parent on a child's answer come back as a new turn (a session no channel holds). */
export const DELEGATION_TURN_JOB = 'agent.delegation.turn';
/** Attempts of a child's job: a daemon that dies during the run gives it another; the last one's failure is handed back. */
const CHILD_ATTEMPTS = 3;
/** How often a waiting call looks whether another daemon of a shared store ended its child. */
const WAIT_POLL_MS = 500;
/** The longest task a delegation takes, in characters. */
const MAX_TASK_CHARS = 20_000;
/** How deep a delegation tree is shown: past it, `delegation.children` stops. */
const TREE_DEPTH = 8;

interface ChildJob { sessionKey: string }
interface TurnJob { parentSession: string; agent: string; recordedId: number; person: string; subject?: string; child: string; text: string }

export interface DelegationsDeps {
  config: () => GatewayConfig;
  store: Store;
  rows: DelegationStore;
  sessions: Sessions;
  jobs: Pick<JobQueue, 'enqueue'>;
  outbox: Pick<Outbox, 'list'>;
  run: (request: AgentRunRequest) => Promise<RunOutcome>;
  /** This daemon's instance id: a waiting call is its daemon's. */
  daemon: string;
  log: Logger;
}

/** What the parent reads when the answer comes back as a turn. */
const turnText = (row: Delegation) => (row.status === 'succeeded'
  ? `Agent ${row.agent} answered the task you delegated (${row.sessionKey}):\n${row.answer ?? ''}`
  : `Agent ${row.agent} could not do the task you delegated (${row.sessionKey}): ${row.error ?? 'it failed'}`);

/**
 * Why a delegation would carry a person's words into a memory other people
 * read, undefined when it does not: the parent keeps each person's memory
 * apart, the child's memory is shared by all its people (the child acts for
 * the parent's person, and what it keeps of the task they may all find), and
 * the operator has not allowed it (agents.<parent>.delegation.allowSharedMemory).
 */
export function sharedMemoryRefusal(agents: GatewayConfig['agents'], parent: string, child: string): string | undefined {
  const from = agents[parent];
  const to = agents[child];
  if (!from || !to || from.memory.scope !== 'person' || to.memory.scope !== 'agent' || from.delegation?.allowSharedMemory) return undefined;
  return `Agent ${parent} may not hand a task to ${child}: ${child}'s memory is shared by all its people (agents.${child}.memory.scope agent), while ${parent} keeps each person's apart, `
    + `so the words of the person this conversation is with would reach what others read. Do the task yourself; the operator may allow it with agents.${parent}.delegation.allowSharedMemory true.`;
}

export class Delegations {
  private readonly deps: DelegationsDeps;
  /** Calls of this daemon waiting for a child, by the child's session: told when it ends here. */
  private readonly waiting = new Map<string, () => void>();

  constructor(deps: DelegationsDeps) {
    this.deps = deps;
  }

  /** The tool agents.delegate. */
  tool(): ToolDef {
    return {
      name: 'agents.delegate',
      description: 'Hand a task to another agent and get its answer. With wait true (the default) this call returns the answer; with wait false it returns at once, and the answer arrives later in this conversation as a new message.',
      inputSchema: {
        type: 'object', additionalProperties: false, required: ['agent', 'task'],
        properties: {
          agent: { type: 'string', pattern: '^[a-z0-9][a-z0-9_-]{0,31}$', description: 'the agent to hand the task to' },
          task: { type: 'string', minLength: 1, maxLength: MAX_TASK_CHARS, description: 'what the agent is to do, with everything it needs to know' },
          wait: { type: 'boolean', description: 'wait for the answer (default true)' },
        },
      },
      handler: (args, context) => this.delegate(args as { agent: string; task: string; wait?: boolean }, context),
    };
  }

  /** A run's call of agents.delegate: checked against the delegating agent's settings, recorded with its job, then waited for or not. */
  async delegate(args: { agent: string; task: string; wait?: boolean }, context: ToolContext): Promise<Record<string, unknown>> {
    const { config, rows, store } = this.deps;
    const parentAgent = context.agent;
    const parentSession = context.sessionKey;
    if (!parentAgent || !parentSession) throw new DomainError('forbidden', 'agents.delegate is for agents\' runs: an agent hands a task to another from its conversation.');
    const agents = config().agents;
    const settings = agents[parentAgent]?.delegation;
    const allowed = settings?.agents ?? [];
    if (!allowed.includes(args.agent)) {
      throw new DomainError('forbidden', `Agent ${parentAgent} may not delegate to ${args.agent}: it may delegate to ${allowed.join(', ') || 'no agent'} (agents.${parentAgent}.delegation.agents).`);
    }
    if (!Object.hasOwn(agents, args.agent)) throw new DomainError('not_found', `No agent ${args.agent} (agents: ${Object.keys(agents).join(', ')}).`);
    const shared = sharedMemoryRefusal(agents, parentAgent, args.agent);
    if (shared) throw new DomainError('forbidden', shared);
    const above = await rows.get(parentSession);
    const depth = (above?.depth ?? 0) + 1;
    // The chain travels with the task: the agents above this one (from the run that started it) and this one.
    const delegators = [...(above?.delegators ?? []), parentAgent];
    const done = `This task was delegated ${depth - 1} ${depth - 1 === 1 ? 'time' : 'times'} already`;
    if (depth > settings!.depth) {
      throw new DomainError('forbidden', `${done}; agent ${parentAgent} may delegate no deeper than ${settings!.depth} (agents.${parentAgent}.delegation.depth). Do the task yourself.`);
    }
    // Each agent above holds its limit for everything below its run: an agent further down allowing more does not lift it.
    for (const upper of delegators.slice(0, -1)) {
      const limit = agents[upper]?.delegation?.depth;
      if (limit !== undefined && depth > limit) {
        throw new DomainError('forbidden', `${done}, starting from a run of agent ${upper}, whose tasks go no deeper than ${limit} (agents.${upper}.delegation.depth). Do the task yourself.`);
      }
    }
    const wait = args.wait !== false;
    const child = await store.transaction(async (tx) => {
      if (await rows.running(parentSession, tx) >= settings!.maxChildren) {
        throw new DomainError('rate_limited', `${settings!.maxChildren} delegated ${settings!.maxChildren === 1 ? 'task is' : 'tasks are'} running for this conversation already (agents.${parentAgent}.delegation.maxChildren); wait for one to end.`);
      }
      const n = await rows.nextNumber(parentSession, tx);
      const address = { channel: 'delegate', account: args.agent, kind: 'direct' as const, peer: `${parentSession}:${n}`, peerName: parentAgent };
      const sessionKey = this.deps.sessions.store.keyOf(address);
      const now = Date.now();
      await this.deps.sessions.record({
        ...address, direction: 'in', sender: `agent:${parentAgent}`, senderName: parentAgent, text: args.task, at: now, role: 'user', messageKind: 'message',
      }, tx);
      const jobId = await this.deps.jobs.enqueue({ kind: DELEGATE_JOB, payload: { sessionKey } satisfies ChildJob, source: `agent:${parentAgent}`, maxAttempts: CHILD_ATTEMPTS }, tx);
      await rows.insert({
        sessionKey, parentSession, n, parentAgent, agent: args.agent, depth, task: args.task, person: context.person, subject: context.subject ?? null, delegators, jobId,
        mode: wait ? 'wait' : 'turn', waiter: wait ? this.deps.daemon : null, createdAt: now,
      }, tx);
      return { sessionKey, jobId };
    });
    if (!wait) {
      return { delegation: child.sessionKey, agent: args.agent, status: 'running', note: 'The answer will arrive in this conversation as a new message when it is done.' };
    }
    return this.waitFor(child.sessionKey, settings!.timeoutSeconds * 1000);
  }

  /** Waits for a child to end, up to the timeout; past it, the answer is to come as a new turn. */
  private async waitFor(sessionKey: string, timeoutMs: number): Promise<Record<string, unknown>> {
    const { rows } = this.deps;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const row = await rows.get(sessionKey);
      if (row && row.status !== 'running') return this.taken(row);
      const left = deadline - Date.now();
      if (left <= 0) break;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, Math.min(left, WAIT_POLL_MS));
        function done() {
          clearTimeout(timer);
          resolve();
        }
        this.waiting.set(sessionKey, done);
      });
      this.waiting.delete(sessionKey);
    }
    if (await rows.stopWaiting(sessionKey)) {
      return { delegation: sessionKey, status: 'running', note: `No answer within ${Math.round(timeoutMs / 1000)} s; it will arrive in this conversation as a new message when it is done.` };
    }
    return this.taken((await rows.get(sessionKey))!);
  }

  /** The answer a waiting call takes, marked handed back. */
  private async taken(row: Delegation): Promise<Record<string, unknown>> {
    await this.deps.rows.delivered(row.sessionKey);
    return row.status === 'succeeded'
      ? { delegation: row.sessionKey, agent: row.agent, status: 'succeeded', answer: row.answer ?? '' }
      : { delegation: row.sessionKey, agent: row.agent, status: 'failed', error: row.error ?? 'the delegated run failed' };
  }

  /** Runs a child's job: the child agent's run in its session, then its answer (or failure) handed back once. */
  async runChild(payload: unknown, { attempt }: { attempt: number }): Promise<Record<string, unknown>> {
    const { rows, log } = this.deps;
    const { sessionKey } = payload as ChildJob;
    const row = await rows.get(sessionKey);
    if (!row) return { skipped: 'the delegation is gone' };
    if (row.status !== 'running') return { status: row.status, answer: 'handed back by an earlier attempt' };
    const task = await this.taskMessage(sessionKey);
    let outcome: DelegationOutcome;
    try {
      // A child runs (or runs again, after a restart) only while its parent may still hand it the task.
      this.assertStillAllowed(row);
      const result = await this.deps.run({
        agentId: row.agent, session: { key: sessionKey }, text: row.task, recordedId: task, surface: 'delegate', person: row.person,
        // The child spends what its parent's run spent (a token's, an automation's budget) and counts to every agent above it,
        // however deep: handing a task on escapes no cap.
        ...(row.subject ? { subject: row.subject } : {}),
        sender: { id: `agent:${row.parentAgent}`, name: row.parentAgent }, delegatedBy: row.parentAgent, delegators: row.delegators,
      });
      outcome = { status: 'succeeded', runId: result.runId, answer: result.text, error: null, usage: result.usage };
    } catch (thrown) {
      const { error } = toDomainError(thrown);
      // The daemon is stopping, or was: the next attempt (here after a restart, or on another daemon) runs the child again, until the last one.
      if ((error.code === 'run_interrupted' || error.retryable) && attempt < CHILD_ATTEMPTS) throw thrown;
      log.warn({ delegation: sessionKey, agent: row.agent, error: error.message }, 'a delegated task failed; its failure goes back to the parent');
      outcome = { status: 'failed', runId: null, answer: null, error: error.message, usage: {} };
    }
    // The waiting call takes the answer itself, unless its daemon is gone.
    const waiterThere = await rows.attached(row.waiter);
    const to = await this.recipient(row.parentSession);
    const ended = await this.deps.store.transaction(async (tx) => {
      const finished = await rows.finish(sessionKey, outcome, tx);
      if (!finished) return undefined;
      if (finished.mode === 'turn' || !waiterThere) await this.handBack(finished, to, tx);
      return finished;
    });
    if (ended) this.waiting.get(sessionKey)?.();
    return { status: outcome.status, runId: outcome.runId, ...(outcome.error ? { error: outcome.error } : {}) };
  }

  /** Refuses a child whose delegation the configuration no longer allows: its parent agent removed, or the target taken off its list. */
  private assertStillAllowed(row: Delegation): void {
    const agents = this.deps.config().agents;
    if (!Object.hasOwn(agents, row.parentAgent)) throw new DomainError('forbidden', `Agent ${row.parentAgent}, which delegated this task, is no longer configured.`);
    if (!(agents[row.parentAgent]!.delegation?.agents ?? []).includes(row.agent)) {
      throw new DomainError('forbidden', `Agent ${row.parentAgent} may no longer delegate to ${row.agent} (agents.${row.parentAgent}.delegation.agents).`);
    }
    const shared = Object.hasOwn(agents, row.agent) ? sharedMemoryRefusal(agents, row.parentAgent, row.agent) : undefined;
    if (shared) throw new DomainError('forbidden', shared);
  }

  /** The task, recorded as the child session's first message. */
  private async taskMessage(sessionKey: string): Promise<number | undefined> {
    const [first] = await this.deps.sessions.store.after(sessionKey, 0, 1);
    return first?.id;
  }

  /**
   * The answer as a new turn of the parent's conversation, in the
   * transaction that ends the delegation: recorded in the parent's session,
   * and the parent's run on it queued (a channel's answer job, whose reply
   * goes to the peer through the outbox).
   */
  private async handBack(row: Delegation, to: string | undefined, tx: Db): Promise<void> {
    if (!(await this.deps.rows.delivered(row.sessionKey, tx))) return;
    const text = turnText(row);
    const recorded = await this.deps.sessions.append(row.parentSession, {
      direction: 'in', sender: `agent:${row.agent}`, senderName: row.agent, text, at: Date.now(), role: 'user', messageKind: 'message',
      data: { delegation: row.sessionKey, status: row.status },
    }, tx);
    if (!recorded) {
      this.deps.log.warn({ delegation: row.sessionKey, parent: row.parentSession }, 'the parent session of a delegation is gone; its answer is kept with the delegation only');
      return;
    }
    const { session, message } = recorded;
    const source = `agent:${row.agent}`;
    if ((SESSION_SOURCES as readonly string[]).includes(session.channel)) {
      const turn: TurnJob = { parentSession: row.parentSession, agent: row.parentAgent, recordedId: message.id, person: row.person, ...(row.subject ? { subject: row.subject } : {}), child: row.agent, text };
      await this.deps.jobs.enqueue({ kind: DELEGATION_TURN_JOB, payload: turn, source, maxAttempts: CHILD_ATTEMPTS }, tx);
      return;
    }
    // A channel's conversation: answered like a message from the peer, to the peer, where the channel's replies go.
    // The run acts for the person the parent's did: the peer whose conversation it is (kernel/person.ts).
    const peerOf = `peer:${session.channel}:${session.account}:`;
    const answer: AnswerJob = {
      channel: session.channel, account: session.account, agentId: row.parentAgent, sessionKey: session.key, recordedId: message.id, text,
      to: to ?? session.peer, sender: { id: row.person.startsWith(peerOf) ? row.person.slice(peerOf.length) : session.peer, name: row.agent },
    };
    await this.deps.jobs.enqueue({ kind: CHANNEL_ANSWER_JOB, payload: answer, source, maxAttempts: 5 }, tx);
  }

  /** Where the channel's replies in a session went last (a chat id, a thread), read before the transaction that hands an answer back. */
  private async recipient(sessionKey: string): Promise<string | undefined> {
    return (await this.deps.outbox.list({ sessionKey, limit: 1 }))[0]?.to;
  }

  /** Runs the parent on an answer come back as a turn, in a session no channel holds. */
  async runTurn(payload: unknown, { attempt }: { attempt: number }): Promise<Record<string, unknown>> {
    const turn = payload as TurnJob;
    // An earlier attempt ran it and then lost its daemon: the run stands.
    if (attempt > 1 && (await this.deps.sessions.store.after(turn.parentSession, turn.recordedId, 50)).some((message) => message.role === 'assistant')) {
      return { answered: 'by an earlier attempt' };
    }
    // A parent that was itself delegated a task answers its child's answer within its own chain, as its first run did.
    const own = await this.deps.rows.get(turn.parentSession);
    const result = await this.deps.run({
      agentId: turn.agent, session: { key: turn.parentSession }, text: turn.text, recordedId: turn.recordedId, surface: 'delegate', person: turn.person,
      ...(turn.subject ? { subject: turn.subject } : {}),
      ...(own ? { delegatedBy: own.parentAgent, delegators: own.delegators } : {}),
      sender: { id: `agent:${turn.child}`, name: turn.child },
    });
    return { runId: result.runId, status: result.status };
  }

  /** At start: answers whose waiting call died with its daemon come back as turns. */
  async recover(): Promise<number> {
    const orphans = await this.deps.rows.orphans();
    for (const row of orphans) {
      const to = await this.recipient(row.parentSession);
      await this.deps.store.transaction((tx) => this.handBack(row, to, tx));
    }
    return orphans.length;
  }

  /** A session's place among delegations: the one that made it, and the tree of those it made. */
  async of(sessionKey: string): Promise<SessionDelegations | undefined> {
    const parent = await this.deps.rows.get(sessionKey);
    const children = await this.tree(sessionKey, 0);
    if (!parent && children.length === 0) return undefined;
    return { parent: parent ? delegationView(parent) : null, children };
  }

  private async tree(sessionKey: string, level: number): Promise<DelegationNode[]> {
    if (level >= TREE_DEPTH) return [];
    const children = await this.deps.rows.children(sessionKey);
    return Promise.all(children.map(async (row) => ({ ...delegationView(row), children: await this.tree(row.sessionKey, level + 1) })));
  }
}
