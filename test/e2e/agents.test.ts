import { expect } from 'chai';
import { freePort, Home } from '../support/cli.ts';
import { startModelServer, type ModelServer } from '../support/model-server.ts';
import { openaiText, openaiToolCalls, ScriptedUpstream } from '../support/scripted-upstream.ts';

describe('agents from the command line: chat, agents, models, usage (e2e)', function () {
  let model: ModelServer;
  let script: ScriptedUpstream;
  let home: Home;

  const json = async (args: string[], input?: string) => {
    const result = await home.run([...args, '--json'], input === undefined ? {} : { input });
    expect(result.code, `${args.join(' ')}: ${result.stderr}`).to.equal(0);
    return JSON.parse(result.stdout);
  };

  before(async () => {
    [model, script] = await Promise.all([startModelServer(), new ScriptedUpstream().start()]);
    home = new Home({ GATEWAY_PORT: String(await freePort()) });
    const set = async (key: string, value: unknown) => expect((await home.run(['config', 'set', key, JSON.stringify(value)])).code).to.equal(0);
    await set('models.providers', {
      local: { kind: 'openai-compatible', baseUrl: model.url, models: ['stories'] },
      script: { kind: 'openai-compatible', baseUrl: script.url, models: ['m'], retries: { max: 0 } },
    });
    await set('agents', { story: { model: 'local/stories', maxOutputTokens: 12 }, ops: { model: 'script/m', tools: ['jobs.get'] } });
    await set('runtime.defaultAgent', 'story');
    expect((await home.run(['start'])).code).to.equal(0);
  });
  after(async () => {
    home?.cleanup();
    model?.stop();
    await script?.stop();
  });

  it('lists agents and models, and never a provider key', async () => {
    const agents = await json(['agents', 'list']);
    expect(agents.agents.map((agent: any) => [agent.id, agent.default])).to.deep.equal([['story', true], ['ops', false]]);
    expect((await home.run(['agents', 'list'])).stdout).to.match(/story \(default\)\s+local\/stories/);
    const before = await json(['models', 'list']);
    expect(before.providers.find((provider: any) => provider.id === 'script')).to.include({ apiKey: 'not set', kind: 'openai-compatible' });
    const set = await home.run(['secrets', 'set', 'models.providers.script.apiKey'], { input: 'sk-very-secret-value\n' });
    expect(set.code, set.stderr).to.equal(0);
    const after = await json(['models', 'list']);
    expect(after.providers.find((provider: any) => provider.id === 'script').apiKey).to.equal('set');
    expect(JSON.stringify(after)).to.not.include('sk-very-secret-value');
    // The key goes to the provider as its bearer, read again after `secrets set` told the daemon.
    script.enqueue(openaiText('keyed'));
    expect((await json(['chat', '--agent', 'ops', 'hello'])).text).to.equal('keyed');
    expect(script.requests.at(-1)!.headers.authorization).to.equal('Bearer sk-very-secret-value');
    expect((await home.run(['logs', '-n', '500', '--raw'])).stdout).to.not.include('sk-very-secret-value');
  });

  it('chat prints the final text without a terminal, the whole result with --json, and reads stdin', async () => {
    const expected = await (await fetch(`${model.url}/chat/completions`, { method: 'POST', body: JSON.stringify({ model: 'stories', messages: [{ role: 'user', content: 'Once upon a time' }], max_tokens: 12 }) })).json() as any;
    const plain = await home.run(['chat', 'Once', 'upon', 'a', 'time', '--session', 'tale']);
    expect(plain.code, plain.stderr).to.equal(0);
    expect(plain.stdout).to.equal(`${expected.choices[0].message.content}\n`);
    const piped = await json(['chat', '--session', 'tale2'], 'Once upon a time\n');
    expect(piped).to.include({ status: 'succeeded', agent: 'story', sessionKey: 'chat:story:dm:tale2', text: expected.choices[0].message.content });
    expect(piped.usage).to.deep.equal({ inputTokens: expected.usage.prompt_tokens, outputTokens: expected.usage.completion_tokens });
    const empty = await home.run(['chat'], { input: '' });
    expect(empty.code).to.equal(2);
    const unknown = await home.run(['chat', '--agent', 'nobody', 'hi', '--json']);
    expect(unknown.code).to.equal(5);
    expect(JSON.parse(unknown.stdout).error.message).to.include('No agent "nobody"');
  });

  it('records tool calls in the session, and sessions show tells the whole story', async () => {
    script.enqueue(openaiToolCalls([{ name: 'jobs_get', args: { id: 'job_zzz' } }]), openaiText('That job does not exist.'));
    const result = await json(['chat', '--agent', 'ops', '--session', 'audit', 'is job_zzz done?']);
    expect(result.toolCalls).to.deep.equal([{ id: 'call_1', name: 'jobs.get', args: { id: 'job_zzz' }, error: 'No job job_zzz.' }]);
    const shown = await home.run(['sessions', 'show', 'chat:ops:dm:audit']);
    expect(shown.stdout).to.match(/\[ops calls jobs\.get\] \{"id":"job_zzz"\}/);
    expect(shown.stdout).to.match(/\[jobs\.get fails\] No job job_zzz\./);
    expect(shown.stdout).to.match(/-> ops: That job does not exist\.\s+\(script\/m, 11 in \/ 7 out, \d+ ms\)/);
    const history = await json(['sessions', 'show', 'chat:ops:dm:audit']);
    expect(history.messages.map((m: any) => m.kind)).to.deep.equal(['message', 'tool_call', 'tool_result', 'message']);
  });

  it('sums up usage by agent, model and surface, with real counts', async () => {
    const usage = await json(['usage', '--since', '1h']);
    const story = usage.byAgent.find((group: any) => group.key === 'story');
    expect(story.calls).to.be.at.least(2);
    expect(story.inputTokens).to.be.greaterThan(0);
    expect(story.uncounted).to.equal(0);
    expect(usage.bySurface.map((group: any) => group.key)).to.include('chat');
    expect((await home.run(['usage'])).stdout).to.match(/Model calls since .*: \d+ \(\d+ failed\)/);
    expect((await home.run(['usage', '--since', 'yesterday-ish'])).code).to.equal(2);
  });
});
