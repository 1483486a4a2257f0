/**
 * Agents: their settings (catalog.ts), the runtime that runs them per
 * session (runtime.ts), a run from anywhere (agent-runner.ts) with its tool
 * loop over the gateway's tool registry (run.ts), runs over the WebSocket
 * (`gateway chat`, WebChat) and answers to channel messages from approved
 * senders (channel-answers.ts), their voice notes heard first and answers
 * spoken back where asked (voice-notes.ts), and tasks one agent hands
 * another (delegations.ts).
 */
import type { AgentSettings } from '../../shared/config/types.ts';
import type { AgentInfo } from '../../shared/protocol/results.ts';
import channelsModule from '../channels/module.ts';
import skillsModule from '../skills/module.ts';
import jobsModule from '../jobs/module.ts';
import { DomainError } from '../kernel/errors.ts';
import { defineModule } from '../kernel/module.ts';
import { OPERATOR } from '../kernel/person.ts';
import modelsModule from '../models/module.ts';
import sessionsModule from '../sessions/module.ts';
import toolsModule from '../tools/module.ts';
import voiceModule from '../voice/module.ts';
import { type AgentRunRequest, AgentRunner } from './agent-runner.ts';
import { AgentCatalog, TOOL_PROFILE_TOOLS } from './catalog.ts';
import { CHANNEL_ANSWER_JOB, ChannelAnswers } from './channel-answers.ts';
import { DELEGATION_MIGRATIONS, DelegationStore } from './delegation-store.ts';
import { DELEGATE_JOB, DELEGATION_TURN_JOB, Delegations } from './delegations.ts';
import { RUN_MIGRATIONS, RunStore } from './run-store.ts';
import { AgentRuntime, type RunOutcome } from './runtime.ts';
import { SessionReader } from './session-reader.ts';
import { VoiceNotes } from './voice-notes.ts';

export type { AgentRunRequest } from './agent-runner.ts';
export type { RunEvent } from './run.ts';
export type { RunOutcome } from './runtime.ts';
export { CHANNEL_ANSWER_JOB, TOOL_PROFILE_TOOLS };
export type { AnswerJob } from './channel-answers.ts';

/** What other modules get from this one. */
export interface Agents {
  resolve(agentId?: string): { id: string; settings: AgentSettings };
  run(request: AgentRunRequest): Promise<RunOutcome>;
  list(): AgentInfo[];
}

export default defineModule<Agents>({
  id: 'agents',
  needs: [jobsModule, sessionsModule, modelsModule, toolsModule, channelsModule, skillsModule, voiceModule],
  migrations: [...RUN_MIGRATIONS, ...DELEGATION_MIGRATIONS],
  async setup(ctx) {
    const runs = new RunStore(ctx.store, ctx.daemon.instanceId);
    const interrupted = await runs.interruptLeftovers();
    if (interrupted > 0) ctx.log.warn({ runs: interrupted }, 'agent runs the previous daemon left running were interrupted');
    const { queue, retention } = ctx.use(jobsModule);
    retention('agentRuns', (retentionMs) => runs.prune(retentionMs));
    const sessions = ctx.use(sessionsModule);
    const { caller } = ctx.use(modelsModule);
    const { runner } = ctx.use(toolsModule);
    const { channels, attachments, outbox } = ctx.use(channelsModule);
    const runtime = new AgentRuntime(ctx.config);
    ctx.onStop((deadline) => runtime.stop(deadline));

    const catalog = new AgentCatalog(ctx.config, () => runner.catalog('agent'));
    const agents = new AgentRunner({
      store: ctx.store, runs, runtime, catalog, sessions, attachments, caller, runner, log: ctx.log,
      reader: new SessionReader({ sessions, caller, log: ctx.log }),
      emit: (event, payload) => ctx.events.emit(event, payload, 'operator.read'),
      skillsPrompt: (agentId) => ctx.use(skillsModule).promptFor(agentId),
    });
    const run = (request: AgentRunRequest) => agents.run(request);

    ctx.rpc.method({ name: 'agents.list', handler: () => ({ agents: catalog.list() }) });
    ctx.rpc.method({
      name: 'agent.run',
      handler: async (params, client) => {
        const { id: agentId } = catalog.resolve(params.agent);
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

    const voice = new VoiceNotes({
      config: ctx.config, voice: ctx.use(voiceModule), sessions: sessions.store, attachments, log: ctx.log, carriesVoice: (channel) => channels.voiceOf(channel) !== undefined,
      voiceFormat: (channel) => channels.voiceOf(channel) ?? 'opus',
    });
    const answers = new ChannelAnswers({ config: ctx.config, channels, run, jobs: queue, voice, log: ctx.log });
    channels.onInbound((inbound, tx) => answers.inbound(inbound, tx));
    ctx.jobs.handle(CHANNEL_ANSWER_JOB, (payload, context) => answers.answer(payload, context));

    const delegationRows = new DelegationStore(ctx.store);
    retention('delegations', (retentionMs) => delegationRows.prune(retentionMs));
    const delegations = new Delegations({
      config: ctx.config, store: ctx.store, rows: delegationRows, sessions, jobs: queue, outbox, run, daemon: ctx.daemon.instanceId, log: ctx.log,
    });
    // Answers whose waiting call died with its daemon come back as turns, before the jobs worker starts.
    const recovered = await delegations.recover();
    if (recovered > 0) ctx.log.warn({ delegations: recovered }, 'answers of delegated tasks whose waiting run was interrupted come back as new turns');
    ctx.tools.add(delegations.tool());
    ctx.jobs.handle(DELEGATE_JOB, (payload, context) => delegations.runChild(payload, context));
    ctx.jobs.handle(DELEGATION_TURN_JOB, (payload, context) => delegations.runTurn(payload, context));
    sessions.decorate(async (session) => {
      const delegation = await delegations.of(session.key);
      return delegation ? { delegation } : undefined;
    });
    return { resolve: (agentId) => catalog.resolve(agentId), run, list: () => catalog.list() };
  },
});
