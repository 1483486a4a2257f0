/**
 * Agents: their settings, the runtime that runs them per session, the tool
 * loop over the gateway's tool registry, runs over the WebSocket (`gateway
 * chat`, WebChat) and answers to channel messages from approved senders.
 */
import type { AgentSettings } from '../../shared/config/types.ts';
import { matchesPattern } from '../../shared/patterns.ts';
import type { AgentInfo, AttachmentView } from '../../shared/protocol/results.ts';
import channelsModule, { describeAttachment, type Attachments, type ChannelManager, type Inbound } from '../channels/module.ts';
import jobsModule, { type JobQueue } from '../jobs/module.ts';
import { WindowCounter } from '../auth/throttle.ts';
import { DomainError, toDomainError } from '../kernel/errors.ts';
import { type AgentRunObserved, observe, observed } from '../kernel/observe.ts';
import { defineModule, type ModuleContext } from '../kernel/module.ts';
import { OPERATOR, peerPerson } from '../kernel/person.ts';
import modelsModule, { type ChatMessage, type ToolSpec, type UserPart } from '../models/module.ts';
import sessionsModule, { type SessionAddress } from '../sessions/module.ts';
import toolsModule from '../tools/module.ts';
import { conversationOf } from './history.ts';
import { executeRun, type RunEvent } from './run.ts';
import { RUN_MIGRATIONS, RunStore } from './run-store.ts';
import { summarise, type Summarised, window as summaryWindow } from './summary.ts';
import { AgentRuntime, RunStopped, type RunOutcome } from './runtime.ts';

export type { RunEvent } from './run.ts';
export type { RunOutcome } from './runtime.ts';

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
  surface: 'channel' | 'chat' | 'api' | 'webchat' | 'automation';
  subject?: string;
  runId?: string;
  signal?: AbortSignal;
  onEvent?: (event: RunEvent & { runId: string }) => void;
}

/** What other modules get from this one. */
export interface Agents {
  resolve(agentId?: string): { id: string; settings: AgentSettings };
  run(request: AgentRunRequest): Promise<RunOutcome>;
  list(): AgentInfo[];
}

/** Largest text file given to a model as its text. */
const MAX_TEXT_FILE_BYTES = 32 * 1024;
const IMAGE_TYPES = new Set(['image/jpeg', 'image/png', 'image/gif', 'image/webp']);
const isTextual = (mimeType: string | undefined) => !!mimeType && (mimeType.startsWith('text/') || mimeType === 'application/json');

/** A turn's text with the files that came with it: kept images as image parts, small text files inline, the rest named. */
async function turnWithFiles(text: string, files: readonly AttachmentView[], sessionKey: string, attachments: Attachments): Promise<UserPart[]> {
  const kept = await attachments.load(sessionKey, files.filter((file) => file.kept).map((file) => file.id));
  const lines = [text];
  const images: UserPart[] = [];
  for (const file of files) {
    const stored = kept.get(file.id);
    if (stored && file.mimeType && IMAGE_TYPES.has(file.mimeType)) {
      images.push({ type: 'image', name: file.name, mimeType: file.mimeType, data: stored.data });
      continue;
    }
    lines.push(describeAttachment(file));
    if (stored && isTextual(file.mimeType) && stored.data.length <= MAX_TEXT_FILE_BYTES) {
      const content = new TextDecoder('utf-8', { fatal: false }).decode(stored.data);
      lines.push(`Content of ${file.name}:\n${content}`);
    }
  }
  const said = lines.filter((line) => line.trim()).join('\n');
  return [...(said ? [{ type: 'text' as const, text: said }] : []), ...images];
}

/** What each tool profile adds to an agent's tools. */
export const TOOL_PROFILE_TOOLS: Record<NonNullable<AgentSettings['toolProfile']>, readonly string[]> = {
  minimal: ['memory.search', 'memory.get', 'memory.note'],
  messaging: ['memory.search', 'memory.get', 'memory.note', 'message.send', 'sessions.list', 'automations.add', 'web.search'],
  coding: ['memory.search', 'memory.get', 'memory.note', 'files.*', 'web.fetch', 'web.search', 'browser.*', 'exec'],
  full: ['*'],
};

/** The tool names and patterns an agent may call: its list and its profile's. */
const toolPatterns = (settings: AgentSettings): readonly string[] => (settings.toolProfile ? [...settings.tools, ...TOOL_PROFILE_TOOLS[settings.toolProfile]] : settings.tools);

/** A bare model as an agent of one step with no tools of its own. */
const directSettings = (model: string): AgentSettings => ({
  model, fallbacks: [], instructions: '', tools: [], maxSteps: 1, toolChoice: 'auto', queue: 'followup', history: 0, clientTools: true, models: [], exec: {},
  memory: { scope: 'person' },
});

const definedOf = <T extends object>(value: T): Partial<T> => Object.fromEntries(Object.entries(value).filter(([, entry]) => entry !== undefined)) as Partial<T>;

/** How long a run waits for the model's first event before it writes its first records anyway. */
const RECORD_WAIT_MS = 10;

const agentNotFound = (message: string) => new DomainError('not_found', message, { code: 'agent_not_found' });

export default defineModule<Agents>({
  id: 'agents',
  needs: [jobsModule, sessionsModule, modelsModule, toolsModule, channelsModule],
  migrations: RUN_MIGRATIONS,
  async setup(ctx) {
    const runs = new RunStore(ctx.store, ctx.daemon.instanceId);
    const interrupted = await runs.interruptLeftovers();
    if (interrupted > 0) ctx.log.warn({ runs: interrupted }, 'agent runs the previous daemon left running were interrupted');
    ctx.use(jobsModule).retention('agentRuns', (retentionMs) => runs.prune(retentionMs));
    const sessions = ctx.use(sessionsModule);
    const { caller } = ctx.use(modelsModule);
    const { runner } = ctx.use(toolsModule);
    const { attachments } = ctx.use(channelsModule);
    const runtime = new AgentRuntime(ctx.config);
    ctx.onStop((deadline) => runtime.stop(deadline));

    const defaultAgent = () => {
      const { agents, runtime: settings } = ctx.config();
      return settings.defaultAgent ?? (agents.default ? 'default' : Object.keys(agents)[0]);
    };
    const resolve = (agentId?: string) => {
      const id = agentId ?? defaultAgent();
      if (!id) throw agentNotFound('No agent is configured: gateway config set agents.main \'{"model":"<provider>/<model>"}\'');
      const { agents } = ctx.config();
      const settings = Object.hasOwn(agents, id) ? agents[id] : undefined;
      if (!settings) throw agentNotFound(`No agent ${JSON.stringify(id)} (agents: ${Object.keys(agents).join(', ') || 'none'}).`);
      return { id, settings };
    };
    // An agent without tools (the common case on the inference API) skips building and sorting the catalog.
    const toolsFor = (settings: AgentSettings): ToolSpec[] => toolPatterns(settings).length === 0 ? [] : runner.catalog('agent')
      .filter((tool) => toolPatterns(settings).some((pattern) => matchesPattern(pattern, tool.name)))
      .map((tool) => ({ name: tool.name, description: tool.description, inputSchema: tool.inputSchema }));

    /**
     * What a run reads of its session: the latest summary and the messages
     * after it, bounded by the agent's window; what falls out of the window
     * is summarised into a new summary message first (a failed summary
     * leaves the window as it is and says so in the log).
     */
    const SESSION_READ_MAX = 5000;
    const readSession = async (sessionKey: string, settings: AgentSettings, agentId: string, turnIds: number[], surface: string, signal: AbortSignal) => {
      const latest = await sessions.store.latestSummary(sessionKey);
      const covered = latest?.data?.summarises as Summarised | undefined;
      const since = covered?.toId ?? 0;
      // Usually a few dozen; the first run on a long session from before summaries reads at most SESSION_READ_MAX of its newest.
      const count = await sessions.store.countAfter(sessionKey, since);
      const unsummarised = count === 0 ? [] : await sessions.store.history(sessionKey, { limit: Math.min(count, SESSION_READ_MAX) });
      const after = unsummarised.filter((message) => message.id > since && message.kind !== 'summary');
      const { older, kept } = summaryWindow(after, settings, turnIds);
      if (older.length === 0 || !settings.model) return { past: kept, summary: latest?.text };
      try {
        const made = await summarise(caller, [settings.model, ...settings.fallbacks], latest?.text, older, { agent: agentId, sessionKey, surface }, signal, settings.contextTokens);
        if (!made.text) throw new Error('the model answered an empty summary');
        const summarises: Summarised = { fromId: covered?.fromId ?? older[0]!.id, toId: older.at(-1)!.id, count: older.length + (covered?.count ?? 0), ...(count > SESSION_READ_MAX ? { unread: count - SESSION_READ_MAX } : {}) };
        await sessions.append(sessionKey, {
          direction: 'out', sender: agentId, text: made.text, at: Date.now(), role: 'system', messageKind: 'summary', via: `agent:${agentId}`,
          data: { summarises, model: made.model, usage: made.usage },
        });
        ctx.log.info({ agent: agentId, sessionKey, messages: older.length }, 'summarised the earlier messages of a long session');
        return { past: kept, summary: made.text };
      } catch (error) {
        if (signal.aborted) throw error;
        ctx.log.warn({ agent: agentId, sessionKey, err: error }, 'the earlier messages of a long session could not be summarised; the model reads the latest ones only');
        return { past: kept, summary: latest?.text };
      }
    };

    const run = async (request: AgentRunRequest): Promise<RunOutcome> => {
      const { id: agentId, settings } = request.direct ? { id: 'direct', settings: directSettings(request.direct) } : resolve(request.agentId);
      if (!settings.model) throw new DomainError('invalid_config', `Agent ${agentId} has no model: gateway config set agents.${agentId}.model <provider>/<model>`);
      if (request.model && request.model !== settings.model && !settings.models.includes(request.model)) {
        throw new DomainError('forbidden', `Agent ${agentId} does not allow model ${request.model} (agents.${agentId}.models).`);
      }
      if (request.runId && (runtime.has(request.runId) || (await runs.exists(request.runId)))) throw new DomainError('conflict', `A run ${request.runId} exists already; choose another id.`);
      const arrived = Date.now();
      // A session named by its address is made with the run's first record (below), not before.
      const address = 'key' in request.session ? undefined : request.session;
      const sessionKey = address ? sessions.store.keyOf(address) : (request.session as { key: string }).key;
      const existing = address ? undefined : await sessions.store.get(sessionKey);
      if (!address && !existing) throw new DomainError('not_found', `No session ${sessionKey}.`);
      const room = (address ?? existing)!.kind === 'group';

      return runtime.submit({
        runId: request.runId, agentId, sessionKey, person: request.person, text: request.text, signal: request.signal, turnIds: request.recordedId === undefined ? [] : [request.recordedId],
        tools: toolPatterns(settings).length > 0,
        start: async ({ runId, text, turnIds, signal }) => {
          const started = Date.now();
          observe(observed.agentRun, (): AgentRunObserved => ({ phase: 'start', runId, agent: agentId, surface: request.surface, at: started }));
          const ended = (outcome: { status: string; model: string | null; usage: { inputTokens?: number; outputTokens?: number }; steps: number; error?: string }) => observe(observed.agentRun, (): AgentRunObserved => ({
            phase: 'end', runId, status: outcome.status, model: outcome.model, steps: outcome.steps, at: Date.now(),
            ...(outcome.usage.inputTokens === undefined ? {} : { inputTokens: outcome.usage.inputTokens }),
            ...(outcome.usage.outputTokens === undefined ? {} : { outputTokens: outcome.usage.outputTokens }),
            ...(outcome.error ? { error: outcome.error } : {}),
          }));
          // The history the model reads: the session's, up to the turns this run answers (the caller's own conversation when it keeps one).
          // The model reads the latest summary and the messages after it, within the agent's window; those that fall out of it are summarised first.
          const read = request.conversation ? { past: [], summary: undefined } : await readSession(sessionKey, settings, agentId, turnIds, request.surface, signal);
          const past = read.past;
          const earlier = past.filter((message) => !turnIds.includes(message.id));
          // Files that came with the turns this run answers: images as images, text files as text, the rest by name.
          const files = past.filter((message) => turnIds.includes(message.id)).flatMap((message) => (message.data?.attachments as AttachmentView[] | undefined) ?? []);
          // The run's first records (the session, the turn, the run) are written in one transaction while the
          // daemon waits for the model: right after its first event is passed on, or a few milliseconds after the
          // request left, whichever comes first; and always before any other record of the run. They never stand
          // in front of the first token. A turn is recorded when its run starts, after the answers it waited for.
          const unkept = new AbortController();
          let begun: Promise<void> | undefined;
          let unrecorded: Error | undefined;
          const begin = (): Promise<void> => {
            begun ??= ctx.store.transaction(async (tx) => {
              await runs.started({ id: runId, agent: agentId, sessionKey, surface: request.surface, at: started }, tx);
              const turn = {
                direction: 'in' as const, sender: request.sender?.id ?? 'operator', senderName: request.sender?.name, person: request.sender?.person, text, at: arrived,
                role: 'user' as const, messageKind: 'message' as const, runId,
              };
              if (request.recordedId !== undefined || request.noTurn) {
                if (address) await sessions.store.ensure(address, arrived, tx);
              } else if (address) await sessions.record({ ...address, ...turn }, tx);
              else await sessions.append(sessionKey, turn, tx);
            }).catch((error: unknown) => {
              // A run that cannot be recorded stops.
              unrecorded = error instanceof Error ? error : new Error(String(error));
              unkept.abort(unrecorded);
              throw unrecorded;
            });
            return begun;
          };
          const beginSoon = (delayMs: number) => {
            // A failure stops the run with the reason.
            const later = () => void begin().catch(() => undefined);
            if (delayMs === 0) setImmediate(later);
            else setTimeout(later, delayMs);
          };
          let told = false;
          const emit = (event: RunEvent) => {
            request.onEvent?.({ ...event, runId });
            publish(ctx, runId, agentId, sessionKey, event);
            if (!told) {
              told = true;
              beginSoon(0);
            }
          };
          try {
            const messages = request.conversation ?? [...conversationOf(earlier, room), { role: 'user' as const, content: files.length ? await turnWithFiles(text, files, sessionKey, attachments) : text }];
            const summarised = read.summary ? `Summary of the conversation before the messages below:\n${read.summary}` : undefined;
            const system = [settings.instructions, request.system, summarised].filter((part) => part && part.trim()).join('\n\n') || undefined;
            const agent = { ...settings, ...definedOf(request.overrides ?? {}) } as AgentSettings & { toolChoice: AgentSettings['toolChoice'] | { name: string } };
            const result = await executeRun({
              runId, agentId, agent, sessionKey, person: request.person, messages, system,
              models: [request.model ?? settings.model!, ...settings.fallbacks.filter((ref) => ref !== (request.model ?? settings.model))],
              tools: toolsFor(settings), clientTools: request.clientTools ?? [],
              meta: { agent: agentId, sessionKey, subject: request.subject, surface: request.surface, runId },
              signal: AbortSignal.any([signal, unkept.signal]), onEvent: emit, begin, onSent: () => beginSoon(RECORD_WAIT_MS),
            }, { caller, runner, sessions, logger: ctx.log });
            await begin();
            await runs.finished(result);
            ended(result);
            ctx.events.emit('agent.done', { runId, agent: agentId, sessionKey, status: result.status, text: result.text, model: result.model, usage: result.usage, steps: result.steps }, 'operator.read');
            return result;
          } catch (thrown) {
            if (unrecorded) {
              ctx.log.error({ err: unrecorded, run: runId, agent: agentId }, 'agent run could not be recorded');
              ended({ status: 'failed', model: null, usage: {}, steps: 0, error: 'the run could not be recorded' });
              throw toDomainError(unrecorded).error;
            }
            await begin();
            const stopped = thrown instanceof RunStopped ? thrown : signal.reason instanceof RunStopped ? signal.reason : undefined;
            const { error, unexpected } = toDomainError(thrown);
            if (unexpected && !stopped) ctx.log.error({ err: thrown, run: runId, agent: agentId }, 'agent run failed');
            const message = stopped?.message ?? error.message;
            const status = stopped?.status ?? 'failed';
            await sessions.append(sessionKey, { direction: 'out', sender: agentId, text: message, at: Date.now(), role: 'assistant', messageKind: 'error', runId, via: `agent:${agentId}`, data: { status } });
            await runs.finished({ runId, agent: agentId, sessionKey, status, text: '', model: null, usage: {}, steps: 0, toolCalls: [], latencyMs: Date.now() - started, error: message });
            ended({ status, model: null, usage: {}, steps: 0, error: message });
            ctx.events.emit('agent.error', { runId, agent: agentId, sessionKey, status, error: message }, 'operator.read');
            if (stopped) throw new DomainError('unavailable', `The run ${status === 'interrupted' ? 'was interrupted' : 'was aborted'}: ${message}.`, { code: `run_${status}` });
            throw error;
          }
        },
      }, settings.queue);
    };

    const list = (): AgentInfo[] => {
      const fallback = defaultAgent();
      return Object.entries(ctx.config().agents).map(([id, agent]) => ({
        id, model: agent.model ?? null, fallbacks: agent.fallbacks, tools: agent.tools, maxSteps: agent.maxSteps, queue: agent.queue, default: id === fallback,
      }));
    };

    ctx.rpc.method({ name: 'agents.list', handler: () => ({ agents: list() }) });
    ctx.rpc.method({
      name: 'agent.run',
      handler: async (params, client) => {
        const { id: agentId } = resolve(params.agent);
        const existing = params.sessionKey ? await sessions.store.get(params.sessionKey) : undefined;
        const outcome = await run({
          agentId, runId: params.runId, text: params.message, surface: 'chat', signal: client.closed,
          sender: { id: `device:${client.deviceId}`, name: client.clientId, person: OPERATOR }, person: OPERATOR,
          session: existing ? { key: existing.key } : { channel: 'chat', account: agentId, kind: 'direct', peer: params.sessionKey ?? 'cli' },
        });
        const { pendingClientCalls: _pending, finishReason: _finish, ...result } = outcome;
        return result;
      },
    });
    ctx.rpc.method({ name: 'agent.abort', handler: ({ runId, sessionKey }) => {
      if (!runId && !sessionKey) throw new DomainError('invalid', 'Name the run (params.runId) or the session (params.sessionKey) to abort.');
      return { aborted: runtime.abort({ runId, sessionKey }) };
    } });

    answerChannels(ctx, ctx.use(channelsModule).channels, run, ctx.use(jobsModule).queue);
    return { resolve, run, list };
  },
});

/** Pushes a run's events to operators: agent.delta, agent.tool. */
function publish(ctx: ModuleContext, runId: string, agent: string, sessionKey: string, event: RunEvent): void {
  if (event.type === 'delta') ctx.events.emit('agent.delta', { runId, agent, sessionKey, text: event.text }, 'operator.read');
  else if (event.type === 'tool') {
    const { call } = event;
    ctx.events.emit('agent.tool', {
      runId, agent, sessionKey, phase: event.phase, id: call.id, name: call.name, args: call.args,
      ...(event.phase === 'result' ? { result: event.result, error: event.error } : { client: event.client }),
    }, 'operator.read');
  }
}

/** The job that answers a channel message: queued with the message, in the transaction that records it. */
export const CHANNEL_ANSWER_JOB = 'channel.answer';
/** A typing indicator lasts about 5 s on the apps that show one. */
const TYPING_EVERY_MS = 4000;

interface AnswerJob {
  channel: string;
  account: string;
  agentId: string;
  sessionKey: string;
  recordedId: number;
  text: string;
  to: string;
  sender: { id: string; name: string };
}

/**
 * The agent named by channels.<id>.agent answers direct messages from approved
 * senders, and rooms when addressed by its nick ("gw: ..." or "gw, ..."); a
 * sender over runtime.senderLimit is told once and then not answered until
 * the window passes.
 *
 * A message to answer is a job, queued in the transaction that records the
 * message; the answer goes to the channel's outbox. A daemon that stops
 * mid-run answers on its next start (or another daemon of a shared store
 * does), and the reply goes out once.
 */
function answerChannels(ctx: ModuleContext, channels: ChannelManager, run: Agents['run'], jobs: JobQueue): void {
  let spent: WindowCounter | undefined;
  channels.onInbound(async ({ channel, message, session, recorded }: Inbound, tx) => {
    const agentId = (ctx.config().channels[channel] as { agent?: string } | undefined)?.agent;
    if (!agentId) return;
    let text = message.text;
    // Where the channel says a reply goes (a Slack thread, a Telegram chat), else the room or the sender's name.
    const to = message.replyTo ?? (message.kind === 'group' ? message.room! : message.senderName);
    if (message.kind === 'group' && message.addressed) {
      text = message.addressed.text;
    } else if (message.kind === 'group') {
      const nick = channels.selfName(channel, message.account);
      const addressed = nick ? new RegExp(`^\\s*${nick.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\s*[:,]\\s*`, 'i').exec(text) : null;
      if (!addressed) return;
      text = text.slice(addressed[0].length);
      if (!text.trim()) return;
    }
    const { max, windowMs } = ctx.config().runtime.senderLimit;
    const key = `${channel}\n${message.sender}`;
    const now = Date.now();
    // The window is read live: a new one starts the counts again.
    if (spent?.windowMs !== windowMs) spent = new WindowCounter(windowMs);
    const budget = spent.hit(key, now);
    if (budget.count > max) {
      // The sender is told once, at the first message over the limit.
      if (budget.count === max + 1) {
        const minutes = Math.ceil((budget.endsAt - now) / 60_000);
        await channels.reply({ channel, account: message.account, to, text: `${message.senderName}: you have reached ${max} messages for now; I will answer again in about ${minutes} minutes.` }, tx);
      }
      ctx.log.info({ channel, sender: message.sender }, 'sender over the per-sender limit; not answered');
      return;
    }
    const job: AnswerJob = {
      channel, account: message.account, agentId, sessionKey: session.key, recordedId: recorded.id, to,
      text: message.kind === 'group' ? `${message.senderName}: ${text}` : text, sender: { id: message.sender, name: message.senderName },
    };
    await jobs.enqueue({ kind: CHANNEL_ANSWER_JOB, payload: job, source: `channel:${channel}`, maxAttempts: 5 }, tx);
  });

  ctx.jobs.handle(CHANNEL_ANSWER_JOB, async (payload, { attempt }) => {
    const job = payload as AnswerJob;
    // An earlier attempt that answered and then lost its daemon before it could say so: the answer stands.
    if (attempt > 1 && await channels.answered(job.sessionKey, job.recordedId)) return { answered: 'by an earlier attempt' };
    // The recipient sees the reply being written (where the channel can show it), refreshed before it fades.
    void channels.typing(job.channel, job.account, job.to);
    const typing = setInterval(() => void channels.typing(job.channel, job.account, job.to), TYPING_EVERY_MS);
    // With channels.<id>.streaming, the reply shows as it is written, in one message the final text then replaces.
    const stream = channels.stream(job.channel, job.account, job.to);
    try {
      const result = await run({
        agentId: job.agentId, session: { key: job.sessionKey }, text: job.text, recordedId: job.recordedId, surface: 'channel', sender: job.sender,
        // In a room too: the person who spoke the message answered, never the room.
        person: peerPerson(job.channel, job.account, job.sender.id),
        ...(stream ? { onEvent: (event: { type: string; text?: string }) => { if (event.type === 'delta') stream.push(event.text!); } } : {}),
      });
      clearInterval(typing);
      const editOf = await stream?.finish();
      if (!result.text.trim()) return { runId: result.runId, status: result.status, replied: false };
      // Merged turns (the collect queue mode) share one run, and its answer goes out once.
      await channels.reply({
        channel: job.channel, account: job.account, to: job.to, text: result.text, key: `run:${result.runId}`, sessionKey: job.sessionKey, runId: result.runId, turnId: job.recordedId,
        ...(editOf ? { editOf } : {}),
      });
      return { runId: result.runId, status: result.status, replied: true };
    } catch (error) {
      clearInterval(typing);
      const editOf = await stream?.finish();
      const { error: failure } = toDomainError(error);
      // The daemon is stopping: the next one (or another daemon) answers.
      if (failure.code === 'run_interrupted' || failure.retryable) throw error;
      ctx.log.warn({ channel: job.channel, agent: job.agentId, error: failure.message }, 'agent could not answer a channel message');
      if (failure.code === 'run_aborted') return { aborted: failure.message };
      await channels.reply({
        channel: job.channel, account: job.account, to: job.to, text: 'Sorry, I could not answer that just now; please try again later.',
        key: `unanswered:${job.sessionKey}:${job.recordedId}`, sessionKey: job.sessionKey, turnId: job.recordedId, ...(editOf ? { editOf } : {}),
      });
      return { failed: failure.message };
    }
  });
}
