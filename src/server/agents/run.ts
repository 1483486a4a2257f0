/**
 * One agent run: the model's steps in a loop, each tool call run through the
 * gateway's tool registry (the same schemas and policy as POST /tools/invoke),
 * every step recorded in the session as it happens, and events for whoever
 * watches (the WebSocket, a streaming HTTP answer).
 */
import type { Logger } from 'pino';
import type { AgentSettings } from '../../shared/config/types.ts';
import type { RunResult, RunUsage } from '../../shared/protocol/results.ts';
import { RunSuspended, toDomainError } from '../kernel/errors.ts';
import type { CallMeta, ChatMessage, ModelCaller, ToolCallRecord, ToolSpec } from '../models/module.ts';
import type { Sessions } from '../sessions/module.ts';
import type { ToolRunner } from '../tools/module.ts';

/** What a run tells its watchers. */
export type RunEvent =
  | { type: 'delta'; text: string }
  | { type: 'tool'; phase: 'call'; call: ToolCallRecord; client: boolean }
  | { type: 'tool'; phase: 'result'; call: ToolCallRecord; result?: unknown; error?: string }
  | { type: 'model'; ref: string }
  | { type: 'step'; usage: RunUsage; finishReason: string };

export interface RunSpec {
  runId: string;
  agentId: string;
  agent: Omit<AgentSettings, 'toolChoice'> & { toolChoice: AgentSettings['toolChoice'] | { name: string } };
  sessionKey: string;
  /** Whom the run acts for: every tool call it makes acts for them (src/server/kernel/person.ts). */
  person: string;
  /** The conversation so far, the new turn included. */
  messages: ChatMessage[];
  system?: string;
  /** Models to try in order: the agent's (or the override), then its fallbacks. */
  models: string[];
  /** Tools the agent may call, by name, with their schemas. */
  tools: ToolSpec[];
  /** Tools the client runs itself (inference API): the model's calls of them end the run and go back to the client. */
  clientTools: ToolSpec[];
  meta: CallMeta;
  /** Where the run's answer goes on its channel, for the tools that reach the person (ask). */
  replyTo?: string;
  signal: AbortSignal;
  onEvent: (event: RunEvent) => void;
  /** Writes the run's first records (once; later calls wait for that); awaited before any other record. */
  begin: () => Promise<void>;
  /** Called when the first model request is on its way. */
  onSent: () => void;
}

export interface RunDeps {
  caller: ModelCaller;
  runner: ToolRunner;
  sessions: Sessions;
  logger: Logger;
}

const addUsage = (total: RunUsage, step: RunUsage): RunUsage => ({
  inputTokens: step.inputTokens === undefined ? total.inputTokens : (total.inputTokens ?? 0) + step.inputTokens,
  outputTokens: step.outputTokens === undefined ? total.outputTokens : (total.outputTokens ?? 0) + step.outputTokens,
});

/** Runs the loop until the model answers without calling a tool, a client tool is called, or the steps run out. */
export async function executeRun(spec: RunSpec, deps: RunDeps): Promise<RunResult & { pendingClientCalls: ToolCallRecord[]; finishReason: string }> {
  const started = Date.now();
  const messages = [...spec.messages];
  const clientNames = new Set(spec.clientTools.map((tool) => tool.name));
  const toolCalls: RunResult['toolCalls'] = [];
  let usage: RunUsage = {};
  let model: string | null = null;
  let text = '';
  let steps = 0;
  let finishReason = 'stop';
  const record = async (entry: Parameters<Sessions['append']>[1]) => {
    await spec.begin();
    return deps.sessions.append(spec.sessionKey, { ...entry, runId: spec.runId, via: `agent:${spec.agentId}` });
  };
  const tools = [...spec.tools, ...spec.clientTools];

  while (steps < spec.agent.maxSteps) {
    steps++;
    const stepStarted = Date.now();
    let stepText = '';
    let stepUsage: RunUsage = {};
    const calls: ToolCallRecord[] = [];
    for await (const event of deps.caller.step(spec.models, {
      // A required (or named) tool is required of the first step; after its result, the model may answer.
      system: spec.system, messages, tools, toolChoice: steps === 1 || spec.agent.toolChoice === 'none' ? spec.agent.toolChoice : 'auto',
      temperature: spec.agent.temperature, maxOutputTokens: spec.agent.maxOutputTokens, signal: spec.signal, onSent: steps === 1 ? spec.onSent : undefined,
    }, spec.meta)) {
      if (event.type === 'model') {
        model = event.ref;
        spec.onEvent({ type: 'model', ref: event.ref });
      } else if (event.type === 'text') {
        stepText += event.text;
        spec.onEvent({ type: 'delta', text: event.text });
      } else if (event.type === 'tool-call') {
        calls.push(event.call);
        spec.onEvent({ type: 'tool', phase: 'call', call: event.call, client: clientNames.has(event.call.name) });
      } else {
        stepUsage = event.usage;
        finishReason = event.finishReason;
        spec.onEvent({ type: 'step', usage: event.usage, finishReason: event.finishReason });
      }
    }
    usage = addUsage(usage, stepUsage);
    text += stepText;
    if (stepText || calls.length === 0) {
      await record({
        direction: 'out', sender: spec.agentId, text: stepText, at: Date.now(), role: 'assistant', messageKind: 'message',
        data: { model, usage: stepUsage, latencyMs: Date.now() - stepStarted, step: steps },
      });
    }
    for (const call of calls) {
      await record({ direction: 'out', sender: spec.agentId, text: '', at: Date.now(), role: 'assistant', messageKind: 'tool_call', data: { id: call.id, name: call.name, args: call.args } });
    }
    if (calls.length === 0) break;
    messages.push({ role: 'assistant', content: stepText, toolCalls: calls });

    const forClient = calls.filter((call) => clientNames.has(call.name));
    if (forClient.length > 0) {
      return finish('succeeded', { pendingClientCalls: forClient, finishReason: 'tool-calls' });
    }
    for (const call of calls) {
      let outcome: { result?: unknown; error?: string };
      try {
        outcome = await runTool(call, spec, deps);
      } catch (thrown) {
        // The call waits for its result (ask): the run ends here, holding nothing, and a new run resumes from the recorded result.
        if (!(thrown instanceof RunSuspended)) throw thrown;
        toolCalls.push({ id: call.id, name: call.name, args: call.args, result: thrown.result });
        spec.onEvent({ type: 'tool', phase: 'result', call, result: thrown.result });
        return finish('waiting', { pendingClientCalls: [], finishReason: 'tool-wait' });
      }
      toolCalls.push({ id: call.id, name: call.name, args: call.args, ...outcome });
      spec.onEvent({ type: 'tool', phase: 'result', call, ...outcome });
      await record({
        direction: 'in', sender: call.name, text: '', at: Date.now(), role: 'tool', messageKind: 'tool_result',
        data: { id: call.id, name: call.name, ...outcome },
      });
      messages.push({ role: 'tool', toolCallId: call.id, toolName: call.name, content: outcome.error ?? outcome.result ?? null, isError: outcome.error !== undefined });
    }
  }
  if (steps >= spec.agent.maxSteps && finishReason === 'tool-calls') {
    deps.logger.warn({ run: spec.runId, agent: spec.agentId, steps }, 'agent run stopped at maxSteps');
  }
  return finish('succeeded', { pendingClientCalls: [], finishReason });

  function finish(status: RunResult['status'], extra: { pendingClientCalls: ToolCallRecord[]; finishReason: string }) {
    return {
      runId: spec.runId, agent: spec.agentId, sessionKey: spec.sessionKey, status, text, model, usage, steps, toolCalls,
      latencyMs: Date.now() - started, ...extra,
    };
  }
}

/** Runs one tool call for the agent; a refusal or failure goes back to the model as the result, and the run goes on. */
async function runTool(call: ToolCallRecord, spec: RunSpec, deps: RunDeps): Promise<{ result?: unknown; error?: string }> {
  // An agent never gets a tool its configuration does not list, whatever the model asks for.
  if (!spec.tools.some((tool) => tool.name === call.name)) return { error: `Tool ${call.name} is not available to this agent.` };
  const args = call.args && typeof call.args === 'object' && !Array.isArray(call.args) ? call.args as Record<string, unknown> : {};
  try {
    const { result } = await deps.runner.invoke({ tool: call.name, args, sessionKey: spec.sessionKey, runId: spec.runId, callId: call.id, ...(spec.replyTo ? { replyTo: spec.replyTo } : {}) }, {
      name: `agent:${spec.agentId}`, surface: 'agent', admin: false, agent: spec.agentId, person: spec.person, ...(spec.meta.subject ? { subject: spec.meta.subject } : {}),
    });
    return { result };
  } catch (thrown) {
    if (spec.signal.aborted) throw spec.signal.reason;
    if (thrown instanceof RunSuspended) throw thrown;
    const { error, unexpected } = toDomainError(thrown);
    if (unexpected) deps.logger.error({ err: thrown, tool: call.name }, 'agent tool call failed');
    return { error: error.message };
  }
}
