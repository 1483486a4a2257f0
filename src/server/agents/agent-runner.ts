/**
 * A run asked of an agent, from anywhere (a channel, `gateway chat`, the
 * inference API, an automation): checked against the agent's settings,
 * queued on its session's lane in the runtime, then run once it holds the
 * lane: the session read (summarised when long), the tool loop (run.ts), the
 * records written and the watchers told; a failure recorded in the session
 * and the run's row.
 */
import type { Logger } from 'pino';
import type { AgentSettings } from '../../shared/config/types.ts';
import type { AttachmentView } from '../../shared/protocol/results.ts';
import type { Attachments } from '../channels/module.ts';
import { DomainError, toDomainError } from '../kernel/errors.ts';
import { type AgentRunObserved, observe, observed } from '../kernel/observe.ts';
import type { CallMeta, ChatMessage, ModelCaller, ToolSpec } from '../models/module.ts';
import type { SessionAddress, Sessions } from '../sessions/module.ts';
import type { Store } from '../store/database.ts';
import type { ToolRunner } from '../tools/module.ts';
import { type AgentCatalog, directSettings, toolPatterns } from './catalog.ts';
import { FirstRecords } from './first-records.ts';
import { conversationOf } from './history.ts';
import { executeRun, type RunEvent } from './run.ts';
import type { RunStore } from './run-store.ts';
import { type AgentRuntime, RunStopped, type RunOutcome } from './runtime.ts';
import type { SessionReader } from './session-reader.ts';
import { turnWithFiles } from './turn-files.ts';

/** A run asked of an agent, from anywhere. */
export interface AgentRunRequest {
  agentId?: string;
  /** An existing session, or the address of one to create with this turn. */
  session: { key: string } | SessionAddress;
  /** The new turn's text, as the model reads it. */
  text: string;
  /** The turn is in the session already (a channel recorded it on arrival): its message id. */
  recordedId?: number;
  /** Nothing to record as the turn (the caller's last message answers a tool call). */
  noTurn?: boolean;
  /**
   * The run resumes the session where an earlier run stopped to wait for a
   * tool's result (ask), now recorded there: the model continues from the
   * session as it is, with no new turn (`text` is not read).
   */
  resume?: boolean;
  /** Where the run's answer goes on its channel (a chat, a thread), for the tools that reach the person (ask). */
  replyTo?: string;
  /**
   * Who says the new turn; `person` when the turn is a person's own words,
   * recorded with it so memory finds the session for them (an automation's
   * prompt in a conversation it continues is no one's).
   */
  sender?: { id: string; name?: string; person?: string };
  /**
   * Whom the run acts for: its tool calls, memory's included, act for this
   * person. Derived by the daemon from where the run came from
   * (src/server/kernel/person.ts), never from the model or a request body.
   */
  person: string;
  /** The whole conversation, the new turn included, when the caller keeps it (the inference API): used instead of the session's history. */
  conversation?: ChatMessage[];
  /** System text of the caller's, after the agent's instructions. */
  system?: string;
  clientTools?: ToolSpec[];
  /** A backend model instead of the agent's own, within agents.<id>.models. */
  model?: string;
  /** A model to call bare, without an agent: no instructions, no tools but the client's, one step (the inference API's provider models). */
  direct?: string;
  /** The caller's own sampling settings, over the agent's. */
  overrides?: { temperature?: number; maxOutputTokens?: number; toolChoice?: AgentSettings['toolChoice'] | { name: string } };
  surface: 'channel' | 'chat' | 'api' | 'webchat' | 'automation' | 'delegate';
  subject?: string;
  /** The agent that delegated this run's task (agents.delegate): its model calls count to that agent too. */
  delegatedBy?: string;
  /** Every agent above this run in its delegation chain, first the one whose run started it: its model calls count to each. */
  delegators?: string[];
  runId?: string;
  signal?: AbortSignal;
  onEvent?: (event: RunEvent & { runId: string }) => void;
}

export interface AgentRunnerDeps {
  store: Store;
  runs: RunStore;
  runtime: AgentRuntime;
  catalog: AgentCatalog;
  sessions: Sessions;
  reader: SessionReader;
  attachments: Pick<Attachments, 'load'>;
  caller: ModelCaller;
  runner: ToolRunner;
  log: Logger;
  /** Tells operators (agent.delta, agent.tool, agent.done, agent.error). */
  emit: (event: string, payload: unknown) => void;
  /** What the model is told of the agent's skills (their names and descriptions), or ''. */
  skillsPrompt?: (agentId: string) => Promise<string>;
}

/** Who runs and where, worked out before the run queues. */
interface Target {
  agentId: string;
  settings: AgentSettings;
  sessionKey: string;
  /** Set when the session is made with the run's first records. */
  address: SessionAddress | undefined;
  room: boolean;
  arrived: number;
}

/** What an ended run tells the observers. */
type Ending = { status: string; model: string | null; usage: { inputTokens?: number; outputTokens?: number }; steps: number; error?: string };

/** How long a run waits for the model's first event before it writes its first records anyway. */
const RECORD_WAIT_MS = 10;

const definedOf = <T extends object>(value: T): Partial<T> => Object.fromEntries(Object.entries(value).filter(([, entry]) => entry !== undefined)) as Partial<T>;

export class AgentRunner {
  private readonly deps: AgentRunnerDeps;

  constructor(deps: AgentRunnerDeps) {
    this.deps = deps;
  }

  /** Checks a run against the agent's settings and queues it on its session's lane; resolves when it ended. */
  async run(request: AgentRunRequest): Promise<RunOutcome> {
    const { runtime, runs, sessions, catalog } = this.deps;
    const { id: agentId, settings } = request.direct ? { id: 'direct', settings: directSettings(request.direct) } : catalog.resolve(request.agentId);
    if (!settings.model) throw new DomainError('invalid_config', `Agent ${agentId} has no model: gateway config set agents.${agentId}.model <provider>/<model>`);
    if (request.model && request.model !== settings.model && !settings.models.includes(request.model)) {
      throw new DomainError('forbidden', `Agent ${agentId} does not allow model ${request.model} (agents.${agentId}.models).`);
    }
    if (request.runId && (runtime.has(request.runId) || (await runs.exists(request.runId)))) throw new DomainError('conflict', `A run ${request.runId} exists already; choose another id.`);
    const arrived = Date.now();
    // A session named by its address is made with the run's first record, not before.
    const address = 'key' in request.session ? undefined : request.session;
    const sessionKey = address ? sessions.store.keyOf(address) : (request.session as { key: string }).key;
    const existing = address ? undefined : await sessions.store.get(sessionKey);
    if (!address && !existing) throw new DomainError('not_found', `No session ${sessionKey}.`);
    const target: Target = { agentId, settings, sessionKey, address, room: (address ?? existing)!.kind === 'group', arrived };
    return runtime.submit({
      runId: request.runId, agentId, sessionKey, person: request.person, text: request.text, signal: request.signal, turnIds: request.recordedId === undefined ? [] : [request.recordedId],
      tools: toolPatterns(settings).length > 0,
      start: (run) => this.start(request, target, run),
    }, settings.queue);
  }

  /** Runs once the run holds its lane and a slot (text and turns may have been merged with others waiting). */
  private async start(request: AgentRunRequest, target: Target, { runId, text, turnIds, signal }: { runId: string; text: string; turnIds: number[]; signal: AbortSignal }): Promise<RunOutcome> {
    const { agentId, settings, sessionKey } = target;
    const started = Date.now();
    observe(observed.agentRun, (): AgentRunObserved => ({ phase: 'start', runId, agent: agentId, surface: request.surface, at: started }));
    // The history the model reads: the session's, up to the turns this run answers (the caller's own conversation when it keeps one).
    // The model reads the latest summary and the messages after it, within the agent's window; those that fall out of it are summarised first.
    // Every model call of the run, a summary of its session's earlier messages included, is charged to whoever the run is for.
    const meta: CallMeta & { agent: string } = {
      agent: agentId, sessionKey, subject: request.subject, surface: request.surface, runId, person: request.person,
      ...(request.delegatedBy ? { delegatedBy: request.delegatedBy } : {}), ...(request.delegators?.length ? { delegators: request.delegators } : {}),
    };
    const read = request.conversation ? { past: [], summary: undefined } : await this.deps.reader.read(sessionKey, settings, turnIds, meta, signal);
    const earlier = read.past.filter((message) => !turnIds.includes(message.id));
    // Files that came with the turns this run answers: images as images, text files as text, the rest by name.
    const files = read.past.filter((message) => turnIds.includes(message.id)).flatMap((message) => (message.data?.attachments as AttachmentView[] | undefined) ?? []);
    const records = new FirstRecords(() => this.writeFirstRecords(request, target, runId, text, started));
    let told = false;
    const emit = (event: RunEvent) => {
      request.onEvent?.({ ...event, runId });
      this.publish(runId, agentId, sessionKey, event);
      if (!told) {
        told = true;
        records.soon(0);
      }
    };
    try {
      const messages = request.conversation ?? (request.resume ? conversationOf(earlier, target.room)
        : [...conversationOf(earlier, target.room), { role: 'user' as const, content: files.length ? await turnWithFiles(text, files, sessionKey, this.deps.attachments) : text }]);
      const summarised = read.summary ? `Summary of the conversation before the messages below:\n${read.summary}` : undefined;
      const skills = request.direct || !this.deps.skillsPrompt ? '' : await this.deps.skillsPrompt(agentId);
      const system = [settings.instructions, skills, request.system, summarised].filter((part) => part && part.trim()).join('\n\n') || undefined;
      const agent = { ...settings, ...definedOf(request.overrides ?? {}) } as AgentSettings & { toolChoice: AgentSettings['toolChoice'] | { name: string } };
      const result = await executeRun({
        runId, agentId, agent, sessionKey, person: request.person, messages, system,
        models: [request.model ?? settings.model!, ...settings.fallbacks.filter((ref) => ref !== (request.model ?? settings.model))],
        tools: this.deps.catalog.toolsFor(settings), clientTools: request.clientTools ?? [],
        meta,
        ...(request.replyTo ? { replyTo: request.replyTo } : {}),
        signal: AbortSignal.any([signal, records.signal]), onEvent: emit, begin: () => records.begin(), onSent: () => records.soon(RECORD_WAIT_MS),
      }, { caller: this.deps.caller, runner: this.deps.runner, sessions: this.deps.sessions, logger: this.deps.log });
      await records.begin();
      await this.deps.runs.finished(result);
      ended(runId, result);
      this.deps.emit('agent.done', { runId, agent: agentId, sessionKey, status: result.status, text: result.text, model: result.model, usage: result.usage, steps: result.steps });
      return result;
    } catch (thrown) {
      throw await this.failed(thrown, records, runId, target, signal, started);
    }
  }

  /** The session, the turn and the run, in one transaction. */
  private async writeFirstRecords(request: AgentRunRequest, { agentId, sessionKey, address, arrived }: Target, runId: string, text: string, started: number): Promise<void> {
    const { sessions } = this.deps;
    await this.deps.store.transaction(async (tx) => {
      await this.deps.runs.started({ id: runId, agent: agentId, sessionKey, surface: request.surface, at: started }, tx);
      const turn = {
        direction: 'in' as const, sender: request.sender?.id ?? 'operator', senderName: request.sender?.name, person: request.sender?.person, text, at: arrived,
        role: 'user' as const, messageKind: 'message' as const, runId,
      };
      if (request.recordedId !== undefined || request.noTurn || request.resume) {
        if (address) await sessions.store.ensure(address, arrived, tx);
      } else if (address) await sessions.record({ ...address, ...turn }, tx);
      else await sessions.append(sessionKey, turn, tx);
    });
  }

  /** Records a run that failed or was stopped (in its session and its row), tells operators, and gives the error its caller gets. */
  private async failed(thrown: unknown, records: FirstRecords, runId: string, { agentId, sessionKey }: Target, signal: AbortSignal, started: number): Promise<unknown> {
    const { log, sessions, runs } = this.deps;
    if (records.failure) {
      log.error({ err: records.failure, run: runId, agent: agentId }, 'agent run could not be recorded');
      ended(runId, { status: 'failed', model: null, usage: {}, steps: 0, error: 'the run could not be recorded' });
      return toDomainError(records.failure).error;
    }
    await records.begin();
    const stopped = thrown instanceof RunStopped ? thrown : signal.reason instanceof RunStopped ? signal.reason : undefined;
    const { error, unexpected } = toDomainError(thrown);
    if (unexpected && !stopped) log.error({ err: thrown, run: runId, agent: agentId }, 'agent run failed');
    const message = stopped?.message ?? error.message;
    const status = stopped?.status ?? 'failed';
    await sessions.append(sessionKey, { direction: 'out', sender: agentId, text: message, at: Date.now(), role: 'assistant', messageKind: 'error', runId, via: `agent:${agentId}`, data: { status } });
    await runs.finished({ runId, agent: agentId, sessionKey, status, text: '', model: null, usage: {}, steps: 0, toolCalls: [], latencyMs: Date.now() - started, error: message });
    ended(runId, { status, model: null, usage: {}, steps: 0, error: message });
    this.deps.emit('agent.error', { runId, agent: agentId, sessionKey, status, error: message });
    if (stopped) return new DomainError('unavailable', `The run ${status === 'interrupted' ? 'was interrupted' : 'was aborted'}: ${message}.`, { code: `run_${status}` });
    return error;
  }

  /** Pushes a run's events to operators: agent.delta, agent.tool. */
  private publish(runId: string, agent: string, sessionKey: string, event: RunEvent): void {
    if (event.type === 'delta') this.deps.emit('agent.delta', { runId, agent, sessionKey, text: event.text });
    else if (event.type === 'tool') {
      const { call } = event;
      this.deps.emit('agent.tool', {
        runId, agent, sessionKey, phase: event.phase, id: call.id, name: call.name, args: call.args,
        ...(event.phase === 'result' ? { result: event.result, error: event.error } : { client: event.client }),
      });
    }
  }
}

/** Tells the observers (metrics, traces) how a run ended. */
function ended(runId: string, outcome: Ending): void {
  observe(observed.agentRun, (): AgentRunObserved => ({
    phase: 'end', runId, status: outcome.status, model: outcome.model, steps: outcome.steps, at: Date.now(),
    ...(outcome.usage.inputTokens === undefined ? {} : { inputTokens: outcome.usage.inputTokens }),
    ...(outcome.usage.outputTokens === undefined ? {} : { outputTokens: outcome.usage.outputTokens }),
    ...(outcome.error ? { error: outcome.error } : {}),
  }));
}
