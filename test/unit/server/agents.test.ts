import { expect } from 'chai';
import { DatabaseSync } from 'node:sqlite';
import type { RpcClient } from '../../../src/cli/rpc-client.ts';
import { startGateway, type TestGateway } from '../../support/harness.ts';
import { startModelServer, type ModelServer } from '../../support/model-server.ts';
import { anthropicText, anthropicToolUse, openaiError, openaiText, openaiToolCalls, ScriptedUpstream } from '../../support/scripted-upstream.ts';
import { sleep, waitFor } from '../../support/cli.ts';

const fast = { timeouts: { totalMs: 5000, firstTokenMs: 500, stallMs: 500 }, retries: { max: 1, baseDelayMs: 10, maxDelayMs: 2000 } };

describe('agents: runs, the tool loop and model policy (in process)', function () {
  let model: ModelServer;
  let script: ScriptedUpstream;
  let backup: ScriptedUpstream;
  let gateway: TestGateway;
  let client: RpcClient;
  const events: { event: string; payload: any }[] = [];

  before(async () => {
    [model, script, backup] = await Promise.all([startModelServer(), new ScriptedUpstream().start(), new ScriptedUpstream().start()]);
    gateway = await startGateway({
      config: {
        models: {
          providers: {
            local: { kind: 'openai-compatible', baseUrl: model.url, models: ['stories'] },
            script: { kind: 'openai-compatible', baseUrl: script.url, models: ['m'], ...fast },
            backup: { kind: 'openai-compatible', baseUrl: backup.url, models: ['m'], ...fast },
            claude: { kind: 'anthropic', baseUrl: script.url, models: ['c'], ...fast },
          },
          aliases: { story: 'local/stories' },
        },
        agents: {
          main: { model: 'story', maxOutputTokens: 16 },
          ops: { model: 'script/m', tools: ['jobs.*', 'sessions.list'], maxSteps: 4 },
          safe: { model: 'script/m', fallbacks: ['backup/m'] },
          claude: { model: 'claude/c', tools: ['jobs.get'] },
        },
      },
    });
    client = await gateway.operator();
    for (const event of ['agent.delta', 'agent.tool', 'agent.done', 'agent.error']) client.on(event, (payload) => events.push({ event, payload }));
  });
  after(async () => {
    await gateway?.stop();
    model?.stop();
    await Promise.all([script?.stop(), backup?.stop()]);
  });
  beforeEach(() => {
    script.reset();
    backup.reset();
    events.length = 0;
  });

  const run = (message: string, options: { agent?: string; sessionKey?: string } = {}) => client.call('agent.run', { message, ...options }, 30_000);
  const history = async (key: string) => (await client.call('sessions.history', { key })).messages;
  const runsInDb = () => {
    const db = new DatabaseSync(gateway.daemon.paths.db, { readOnly: true });
    try {
      return db.prepare('SELECT id, status, error FROM agent_runs').all() as { id: string; status: string; error: string | null }[];
    } finally {
      db.close();
    }
  };

  it('runs the real model through an alias: the same text and token counts as calling it directly, streamed and recorded', async () => {
    const direct = await (await fetch(`${model.url}/chat/completions`, { method: 'POST', body: JSON.stringify({ model: 'stories', messages: [{ role: 'user', content: 'Once upon a time' }], max_tokens: 16 }) })).json() as any;
    const result = await run('Once upon a time', { agent: 'main', sessionKey: 'story-1' });
    expect(result).to.include({ status: 'succeeded', agent: 'main', model: 'local/stories', steps: 1, text: direct.choices[0].message.content });
    expect(result.usage).to.deep.equal({ inputTokens: direct.usage.prompt_tokens, outputTokens: direct.usage.completion_tokens });
    expect(events.filter((e) => e.event === 'agent.delta' && e.payload.runId === result.runId).map((e) => e.payload.text).join('')).to.equal(result.text);
    expect(events.find((e) => e.event === 'agent.done')?.payload).to.include({ runId: result.runId, status: 'succeeded' });
    const messages = await history(result.sessionKey);
    expect(messages.map((m) => [m.role, m.kind, m.text])).to.deep.equal([['user', 'message', 'Once upon a time'], ['assistant', 'message', result.text]]);
    expect(messages[1]!.data).to.deep.include({ model: 'local/stories', usage: result.usage });
    const usage = await client.call('usage.summary', {});
    expect(usage.byAgent.find((group) => group.key === 'main')).to.include({ inputTokens: direct.usage.prompt_tokens, outputTokens: direct.usage.completion_tokens, uncounted: 0 });
    expect(script.requests).to.have.length(0);
  });

  it('loops through tools: calls run through the registry, failures go back to the model, and every step is in the session', async () => {
    script.enqueue(
      openaiToolCalls([{ name: 'jobs_get', args: { id: 'job_missing' } }, { name: 'jobs_get', args: { wrong: 1 } }, { name: 'gateway_reload', args: {} }]),
      openaiToolCalls([{ name: 'sessions_list', args: { limit: 1 } }]),
      openaiText('All checked.'),
    );
    const result = await run('check the jobs', { agent: 'ops' });
    expect(result).to.include({ status: 'succeeded', text: 'All checked.', steps: 3 });
    expect(result.usage).to.deep.equal({ inputTokens: 20 + 20 + 11, outputTokens: 9 + 9 + 7 });
    expect(result.toolCalls.map((call) => [call.name, call.error ?? 'ok'])).to.deep.equal([
      ['jobs.get', 'No job job_missing.'],
      ['jobs.get', 'Invalid args for jobs.get: args must have required property \'id\'; args must NOT have additional properties.'],
      ['gateway_reload', 'Tool gateway_reload is not available to this agent.'],
      ['sessions.list', 'ok'],
    ]);
    // The model saw the tools under provider-safe names, with their schemas, and got every result back.
    const offered = script.requests[0]!.body.tools.map((tool: any) => tool.function.name);
    expect(offered).to.include.members(['jobs_get', 'jobs_enqueue', 'sessions_list']).and.not.include('gateway_reload');
    const second = script.requests[1]!.body.messages;
    expect(second.filter((m: any) => m.role === 'tool').map((m: any) => m.tool_call_id)).to.deep.equal(['call_1', 'call_2', 'call_3']);
    expect(script.requests[0]!.body.stream_options).to.deep.equal({ include_usage: true });
    const kinds = (await history(result.sessionKey)).map((m) => `${m.role}:${m.kind}${m.data?.name ? `:${m.data.name}` : ''}`);
    expect(kinds).to.deep.equal([
      'user:message', 'assistant:tool_call:jobs.get', 'assistant:tool_call:jobs.get', 'assistant:tool_call:gateway_reload',
      'tool:tool_result:jobs.get', 'tool:tool_result:jobs.get', 'tool:tool_result:gateway_reload',
      'assistant:tool_call:sessions.list', 'tool:tool_result:sessions.list', 'assistant:message',
    ]);
    expect(events.filter((e) => e.event === 'agent.tool').map((e) => `${e.payload.phase}:${e.payload.name}`)).to.include.members(['call:jobs.get', 'result:jobs.get', 'result:sessions.list']);
  });

  it('retries a 429 after its Retry-After, and falls back to the next model on a status the provider names', async () => {
    script.enqueue(openaiError(429, 'slow down', { 'retry-after': '1' }), openaiText('after the wait'));
    const started = Date.now();
    const retried = await run('hello', { agent: 'ops' });
    expect(retried.text).to.equal('after the wait');
    expect(Date.now() - started).to.be.at.least(1000);
    expect(script.requests).to.have.length(2);

    script.enqueue(openaiError(503, 'down'), openaiError(503, 'still down'));
    backup.enqueue(openaiText('from the backup'));
    const fellBack = await run('hello', { agent: 'safe' });
    expect(fellBack).to.include({ text: 'from the backup', model: 'backup/m' });
    expect(script.requests).to.have.length(4);

    script.enqueue(openaiError(400, 'bad tool schema'));
    const refused = await run('hello', { agent: 'safe' }).catch((error: Error) => error);
    expect((refused as Error).message).to.match(/Provider script \(script\/m\) answered 400: bad tool schema/);
    expect(backup.requests, 'a 400 is not a reason to fall back').to.have.length(1);
  });

  it('times out a slow first token and a stalled stream, while keepalive comments count as activity', async () => {
    script.enqueue({ sse: openaiText('late').sse, delayMs: 1500 }, { sse: openaiText('late').sse, delayMs: 1500 });
    const slow = await run('hello', { agent: 'ops' }).catch((error: Error) => error);
    expect((slow as Error).message).to.match(/timed out/);

    const comments = Array.from({ length: 8 }, () => ({ comment: 'keepalive', delayMs: 200 }));
    script.enqueue({ sse: [...openaiText('x').sse.slice(0, 2), ...comments, ...openaiText('x').sse.slice(2)] });
    expect((await run('hello', { agent: 'ops' })).text).to.equal('x');

    const stalled = openaiText('y').sse;
    const stall1 = { sse: [stalled[0]!, { ...stalled[1]!, delayMs: 1500 }] };
    script.enqueue(stall1, stall1);
    const stall = await run('hello', { agent: 'ops' }).catch((error: Error) => error);
    expect((stall as Error).message).to.match(/no data within 500 ms|timed out/);
  });

  it('records the turn and the run while the model thinks, and refuses a run id already in use', async () => {
    script.enqueue({ sse: openaiText('thought it over').sse, delayMs: 400 });
    const pending = client.call('agent.run', { message: 'think first', agent: 'ops', sessionKey: 'thinking', runId: 'run_chosen' }, 30_000);
    await waitFor(async () => (await history('chat:ops:dm:thinking').catch(() => [])).length === 1, 300, 'the turn in the session before the answer');
    expect((await history('chat:ops:dm:thinking'))[0]).to.include({ role: 'user', text: 'think first', runId: 'run_chosen' });
    expect(runsInDb().find((entry) => entry.id === 'run_chosen')).to.include({ status: 'running' });
    const again = await client.call('agent.run', { message: 'same id', agent: 'ops', sessionKey: 'elsewhere', runId: 'run_chosen' }).catch((error: Error) => error);
    expect((again as Error).message).to.match(/A run run_chosen exists already/);
    expect((await pending).text).to.equal('thought it over');
    expect((await history('chat:ops:dm:thinking')).map((m) => m.text)).to.deep.equal(['think first', 'thought it over']);
    expect(script.requests).to.have.length(1);
  });

  it('fails cleanly on malformed SSE and a dropped connection: no run left running, the failure in the session', async () => {
    script.enqueue({ sse: [{ raw: 'data: {not json\n\n' }] }, { sse: [{ raw: 'data: {not json\n\n' }] });
    const malformed = await run('hello', { agent: 'ops', sessionKey: 'broken' }).catch((error: Error) => error);
    expect(malformed).to.be.instanceOf(Error);
    const drop = { sse: [{ data: openaiText('z').sse[0]!.data }, { drop: true as const }] };
    script.enqueue(drop, drop);
    const dropped = await run('hello', { agent: 'ops', sessionKey: 'broken' }).catch((error: Error) => error);
    expect(dropped).to.be.instanceOf(Error);
    expect(runsInDb().filter((entry) => entry.status === 'running')).to.deep.equal([]);
    const messages = await history('chat:ops:dm:broken');
    expect(messages.filter((m) => m.kind === 'error')).to.have.length(2);
    expect((await client.call('health')).ok).to.equal(true);
  });

  it('speaks the Anthropic messages API: text, and a tool call in the loop', async () => {
    script.enqueue(anthropicToolUse('jobs_get', { id: 'job_x' }), anthropicText('Nothing there.', { input_tokens: 40, output_tokens: 4 }));
    const result = await run('is job_x done?', { agent: 'claude' });
    expect(result).to.include({ text: 'Nothing there.', model: 'claude/c', steps: 2 });
    expect(result.usage).to.deep.equal({ inputTokens: 30 + 40, outputTokens: 12 + 4 });
    expect(script.requests.map((r) => r.path)).to.deep.equal(['/v1/messages', '/v1/messages']);
    expect(script.requests[1]!.body.messages.at(-1).content[0]).to.include({ type: 'tool_result', tool_use_id: 'toolu_1' });
  });

  it('runs one message at a time per session: a followup waits, collect merges, interrupt stops the run', async () => {
    script.enqueue(openaiText('one', undefined, { gapMs: 300 }), openaiText('two'));
    const [first, second] = await Promise.all([run('first', { agent: 'ops', sessionKey: 'lane' }), sleep(50).then(() => run('second', { agent: 'ops', sessionKey: 'lane' }))]);
    expect([first.text, second.text]).to.deep.equal(['one', 'two']);
    expect(script.requests[1]!.body.messages.map((m: any) => m.content)).to.deep.equal(['first', 'one', 'second']);

    await client.call('config.set', { key: 'agents.ops.queue', value: 'collect' });
    script.reset();
    script.enqueue(openaiText('busy', undefined, { gapMs: 300 }), openaiText('merged'));
    const runs = await Promise.all([run('a', { agent: 'ops', sessionKey: 'lane2' }), sleep(50).then(() => run('b', { agent: 'ops', sessionKey: 'lane2' })), sleep(80).then(() => run('c', { agent: 'ops', sessionKey: 'lane2' }))]);
    expect(runs.map((r) => r.text)).to.deep.equal(['busy', 'merged', 'merged']);
    expect(script.requests).to.have.length(2);

    await client.call('config.set', { key: 'agents.ops.queue', value: 'interrupt' });
    script.reset();
    script.enqueue(openaiText('never finished', undefined, { gapMs: 500 }), openaiText('answered'));
    const interrupted = run('long task', { agent: 'ops', sessionKey: 'lane3' }).catch((error: Error) => error);
    await sleep(200);
    const answered = await run('never mind', { agent: 'ops', sessionKey: 'lane3' });
    expect(answered.text).to.equal('answered');
    expect(((await interrupted) as Error).message).to.match(/interrupted the run/);
    await client.call('config.set', { key: 'agents.ops.queue', value: 'followup' });
  });

  it('bounds runs across sessions, and aborts a run on request', async () => {
    await client.call('config.set', { key: 'runtime.concurrency', value: 1 });
    script.enqueue(openaiText('slow one', undefined, { gapMs: 300 }), openaiText('next'));
    const order: string[] = [];
    await Promise.all([
      run('x', { agent: 'ops', sessionKey: 'c1' }).then((r) => order.push(r.text)),
      sleep(50).then(() => run('y', { agent: 'ops', sessionKey: 'c2' })).then((r) => order.push(r.text)),
    ]);
    expect(order).to.deep.equal(['slow one', 'next']);
    await client.call('config.set', { key: 'runtime.concurrency', value: 4 });

    script.enqueue(openaiText('a very long answer', undefined, { pieces: 10, gapMs: 300 }));
    const running = run('go', { agent: 'ops', sessionKey: 'stopme' }).catch((error: Error) => error);
    await waitFor(() => events.find((e) => e.event === 'agent.delta' && e.payload.sessionKey === 'chat:ops:dm:stopme'), 5000, 'the run to start');
    expect(await client.call('agent.abort', { sessionKey: 'chat:ops:dm:stopme' })).to.deep.equal({ aborted: 1 });
    expect(((await running) as Error).message).to.match(/aborted/);
    const last = (await history('chat:ops:dm:stopme')).at(-1)!;
    expect(last).to.include({ kind: 'error' });
    expect(runsInDb().find((entry) => entry.status === 'aborted')).to.not.equal(undefined);
  });
});
