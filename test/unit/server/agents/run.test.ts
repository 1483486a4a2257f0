import { expect } from 'chai';
import pino from 'pino';
import { executeRun, type RunEvent, type RunSpec } from '../../../../src/server/agents/run.ts';
import { DomainError } from '../../../../src/server/kernel/errors.ts';
import type { CallEvent, ModelCaller, StepRequest, ToolCallRecord } from '../../../../src/server/models/module.ts';
import type { NewEntry, Sessions } from '../../../../src/server/sessions/module.ts';
import type { ToolRunner } from '../../../../src/server/tools/module.ts';

const tool = (name: string) => ({ name, description: name, inputSchema: { type: 'object' } });
const call = (id: string, name: string, args: unknown = {}): ToolCallRecord => ({ id, name, args });
const finish = (inputTokens?: number, outputTokens?: number, finishReason = 'stop'): CallEvent => ({ type: 'finish', finishReason, usage: { inputTokens, outputTokens } });

describe('agents: the tool loop of one run', () => {
  let steps: CallEvent[][];
  let requests: (Omit<StepRequest, 'signal'> & { refs: readonly string[] })[];
  let records: NewEntry[];
  let invoked: { tool: string; args: unknown; caller: unknown }[];
  let tools: Record<string, (args: Record<string, unknown>) => unknown>;
  let events: RunEvent[];
  let order: string[];
  let warnings: string[];

  beforeEach(() => {
    steps = [];
    requests = [];
    records = [];
    invoked = [];
    events = [];
    order = [];
    warnings = [];
    tools = { 'jobs.get': (args) => ({ id: args.id, status: 'queued' }) };
  });

  const caller = {
    async *step(refs: readonly string[], request: StepRequest): AsyncGenerator<CallEvent> {
      requests.push({ ...request, refs, messages: structuredClone(request.messages) });
      request.onSent?.();
      yield* steps.shift() ?? [finish()];
    },
  } as unknown as ModelCaller;
  const runner = {
    invoke: async (request: { tool: string; args: Record<string, unknown> }, who: unknown) => {
      invoked.push({ tool: request.tool, args: request.args, caller: who });
      const run = tools[request.tool];
      if (!run) throw new DomainError('not_found', `No tool ${request.tool}.`);
      return { result: run(request.args) };
    },
  } as unknown as ToolRunner;
  const sessions = {
    append: async (_key: string, entry: NewEntry) => {
      order.push(`record:${entry.messageKind}`);
      records.push(entry);
      return undefined;
    },
  } as unknown as Sessions;

  const spec = (over: Partial<RunSpec> = {}): RunSpec => ({
    runId: 'run_1', agentId: 'ops', sessionKey: 's1', person: 'operator', system: 'be brief',
    agent: { model: 'a/m', fallbacks: [], instructions: '', tools: [], maxSteps: 4, toolChoice: 'auto', queue: 'followup', history: 50, clientTools: false, models: [], exec: {}, memory: { scope: 'person' } },
    messages: [{ role: 'user', content: 'check the job' }], models: ['a/m', 'b/m'], tools: [tool('jobs.get')], clientTools: [],
    meta: { surface: 'chat', runId: 'run_1' }, signal: new AbortController().signal,
    onEvent: (event) => void events.push(event), begin: async () => void order.push('begin'), onSent: () => void order.push('sent'),
    ...over,
  });
  const run = (over: Partial<RunSpec> = {}) => executeRun(spec(over), { caller, runner, sessions, logger: pino({ level: 'warn' }, { write: (line: string) => void warnings.push(JSON.parse(line).msg) }) });

  it('a step without tool calls answers: its text, usage and model recorded once, after the first records', async () => {
    steps = [[{ type: 'model', ref: 'b/m', providerId: 'b' }, { type: 'text', text: 'All ' }, { type: 'text', text: 'fine.' }, finish(12, 3)]];
    const result = await run();
    expect(result).to.include({ status: 'succeeded', text: 'All fine.', model: 'b/m', steps: 1, finishReason: 'stop', runId: 'run_1', agent: 'ops', sessionKey: 's1' });
    expect(result.usage).to.deep.equal({ inputTokens: 12, outputTokens: 3 });
    expect(result.pendingClientCalls).to.deep.equal([]);
    expect(records).to.have.length(1);
    expect(records[0]).to.deep.include({ direction: 'out', sender: 'ops', text: 'All fine.', role: 'assistant', messageKind: 'message', runId: 'run_1', via: 'agent:ops' });
    expect(records[0]!.data).to.deep.include({ model: 'b/m', usage: { inputTokens: 12, outputTokens: 3 }, step: 1 });
    expect(order).to.deep.equal(['sent', 'begin', 'record:message']);
    expect(events.map((event) => event.type)).to.deep.equal(['model', 'delta', 'delta', 'step']);
    expect(requests[0]).to.deep.include({ refs: ['a/m', 'b/m'], system: 'be brief', toolChoice: 'auto' });
  });

  it('runs each tool call, records call and result, gives the results back to the model, and sums the usage', async () => {
    steps = [
      [{ type: 'tool-call', call: call('c1', 'jobs.get', { id: 'job_1' }) }, { type: 'tool-call', call: call('c2', 'jobs.get', ['not', 'an', 'object']) }, finish(10, 2, 'tool-calls')],
      [{ type: 'text', text: 'Queued.' }, finish(20, undefined)],
    ];
    const result = await run();
    expect(result).to.include({ text: 'Queued.', steps: 2 });
    expect(result.usage).to.deep.equal({ inputTokens: 30, outputTokens: 2 });
    expect(result.toolCalls).to.deep.equal([
      { id: 'c1', name: 'jobs.get', args: { id: 'job_1' }, result: { id: 'job_1', status: 'queued' } },
      { id: 'c2', name: 'jobs.get', args: ['not', 'an', 'object'], result: { id: undefined, status: 'queued' } },
    ]);
    expect(invoked[0]).to.deep.equal({ tool: 'jobs.get', args: { id: 'job_1' }, caller: { name: 'agent:ops', surface: 'agent', admin: false, agent: 'ops', person: 'operator' } });
    expect(invoked[1]!.args, 'arguments that are not an object become none').to.deep.equal({});
    expect(records.map((entry) => `${entry.role}:${entry.messageKind}`)).to.deep.equal(['assistant:tool_call', 'assistant:tool_call', 'tool:tool_result', 'tool:tool_result', 'assistant:message']);
    expect(requests[1]!.messages.slice(1)).to.deep.equal([
      { role: 'assistant', content: '', toolCalls: [call('c1', 'jobs.get', { id: 'job_1' }), call('c2', 'jobs.get', ['not', 'an', 'object'])] },
      { role: 'tool', toolCallId: 'c1', toolName: 'jobs.get', content: { id: 'job_1', status: 'queued' }, isError: false },
      { role: 'tool', toolCallId: 'c2', toolName: 'jobs.get', content: { id: undefined, status: 'queued' }, isError: false },
    ]);
    expect(events.filter((event) => event.type === 'tool').map((event) => (event as { phase: string }).phase)).to.deep.equal(['call', 'call', 'result', 'result']);
  });

  it('a tool the agent was not given, or one that fails, goes back to the model as an error and the run goes on', async () => {
    steps = [[{ type: 'tool-call', call: call('c1', 'gateway.reload') }, { type: 'tool-call', call: call('c2', 'jobs.missing') }, finish()], [{ type: 'text', text: 'Sorry.' }, finish()]];
    const result = await run({ tools: [tool('jobs.get'), tool('jobs.missing')] });
    expect(result.toolCalls.map((done) => [done.name, done.error])).to.deep.equal([['gateway.reload', 'Tool gateway.reload is not available to this agent.'], ['jobs.missing', 'No tool jobs.missing.']]);
    expect(invoked.map((done) => done.tool), 'never asked of the registry').to.deep.equal(['jobs.missing']);
    expect(requests[1]!.messages.filter((message) => message.role === 'tool').map((message) => (message as { isError?: boolean }).isError)).to.deep.equal([true, true]);
    expect(result.text).to.equal('Sorry.');
  });

  it('a required tool choice holds for the first step only; "none" holds for every step', async () => {
    steps = [[{ type: 'tool-call', call: call('c1', 'jobs.get', { id: 'x' }) }, finish()], [finish()]];
    await run({ agent: { ...spec().agent, toolChoice: 'required' } });
    expect(requests.map((request) => request.toolChoice)).to.deep.equal(['required', 'auto']);
    requests = [];
    steps = [[{ type: 'tool-call', call: call('c1', 'jobs.get', { id: 'x' }) }, finish()], [finish()]];
    await run({ agent: { ...spec().agent, toolChoice: 'none' } });
    expect(requests.map((request) => request.toolChoice)).to.deep.equal(['none', 'none']);
    expect(order.filter((step) => step === 'sent'), 'onSent on the first step only').to.have.length(2);
  });

  it('a call of a client\'s tool ends the run and hands the calls back, running none of them', async () => {
    steps = [[{ type: 'text', text: 'Let me look.' }, { type: 'tool-call', call: call('c1', 'lookup', { q: 'x' }) }, { type: 'tool-call', call: call('c2', 'jobs.get', { id: 'y' }) }, finish(5, 5, 'tool-calls')]];
    const result = await run({ clientTools: [tool('lookup')] });
    expect(result).to.include({ status: 'succeeded', finishReason: 'tool-calls', steps: 1, text: 'Let me look.' });
    expect(result.pendingClientCalls).to.deep.equal([call('c1', 'lookup', { q: 'x' })]);
    expect(invoked).to.deep.equal([]);
    expect(requests[0]!.tools!.map((offered) => offered.name)).to.deep.equal(['jobs.get', 'lookup']);
    expect(events.find((event) => event.type === 'tool')).to.deep.include({ client: true });
  });

  it('stops at maxSteps, saying so in the log when the model still wanted tools', async () => {
    steps = Array.from({ length: 5 }, (_, index) => [{ type: 'tool-call', call: call(`c${index}`, 'jobs.get', { id: 'x' }) } as CallEvent, finish(1, 1, 'tool-calls')]);
    const result = await run({ agent: { ...spec().agent, maxSteps: 3 } });
    expect(result).to.include({ steps: 3, finishReason: 'tool-calls' });
    expect(result.toolCalls).to.have.length(3);
    expect(warnings).to.include('agent run stopped at maxSteps');
  });

  it('a tool that fails because the run was aborted stops the run with the abort\'s reason', async () => {
    const controller = new AbortController();
    const reason = new Error('aborted by an operator');
    tools['jobs.get'] = () => {
      controller.abort(reason);
      throw new Error('cancelled');
    };
    steps = [[{ type: 'tool-call', call: call('c1', 'jobs.get', { id: 'x' }) }, finish()]];
    expect(await run({ signal: controller.signal }).catch((error: unknown) => error)).to.equal(reason);
  });
});
