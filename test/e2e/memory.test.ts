import { expect } from 'chai';
import { freePort, Home } from '../support/cli.ts';
import { openaiText, openaiToolCalls, ScriptedUpstream } from '../support/scripted-upstream.ts';

const TOKEN = 'memory-gateway-token-for-tests';

describe('memory: an agent searches its own conversations and notes (e2e)', function () {
  this.timeout(60_000);
  let home: Home;
  let base: string;
  let upstream: ScriptedUpstream;
  const set = (key: string, value: unknown) => home.set(key, value);
  const invoke = async (tool: string, args: Record<string, unknown>) => {
    const response = await fetch(`${base}/tools/invoke`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify({ tool, args }) });
    return { status: response.status, body: await response.json() as any };
  };
  const chat = async (agent: string, session: string, text: string, answer: string) => {
    upstream.enqueue(openaiText(answer));
    const result = await home.run(['chat', '--agent', agent, '--session', session, text, '--json']);
    expect(result.code, result.stderr).to.equal(0);
  };

  beforeEach(async () => {
    upstream = await new ScriptedUpstream().start();
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    home = new Home({ GATEWAY_PORT: String(port), GATEWAY_TOKEN: TOKEN });
    await set('models.providers.script', { kind: 'openai-compatible', baseUrl: upstream.url, models: ['m'], retries: { max: 0 } });
    await set('agents.helper', { model: 'script/m', toolProfile: 'minimal' });
    await set('agents.other', { model: 'script/m' });
    await set('runtime.defaultAgent', 'helper');
    expect((await home.run(['start'])).code).to.equal(0);
  });
  afterEach(async () => {
    home.cleanup();
    await upstream.stop();
  });

  it('finds words in the agent\'s own conversations and notes, best first, never another agent\'s', async () => {
    await chat('helper', 'garden', 'My favourite colour is teal, and the tomatoes need water on Fridays.', 'Noted: teal, and Friday watering.');
    await chat('helper', 'garden', 'What about the roses?', 'Roses like a sunny spot.');
    await chat('helper', 'travel', 'Book the train to Lyon for the conference.', 'Train to Lyon booked.');
    await chat('other', 'vault', 'The launch code for the teal rocket is 4242.', 'Stored the launch code.');

    // The agent keeps a note through a tool call of its own.
    upstream.enqueue(openaiToolCalls([{ name: 'memory_note', args: { text: 'Sam prefers teal mugs over white ones.' } }]), openaiText('I will remember that.'));
    const noted = await home.run(['chat', '--agent', 'helper', '--session', 'mugs', 'Remember that Sam likes teal mugs', '--json']);
    expect(noted.code, noted.stderr).to.equal(0);

    const found = await invoke('memory.search', { query: 'teal' });
    expect(found.status, JSON.stringify(found.body)).to.equal(200);
    const results = found.body.result.results as any[];
    expect(results[0]).to.include({ kind: 'note' });
    expect(results[0].excerpt).to.include('[teal]');
    const texts = results.map((result) => result.excerpt).join('\n');
    expect(texts, texts).to.include('[teal], and the tomatoes');
    expect(texts, 'another agent\'s conversation is not searched').to.not.include('launch code');
    for (const result of results) expect(result.sessionKey ?? '').to.not.include('vault');

    const both = (await invoke('memory.search', { query: 'train Lyon' })).body.result.results;
    expect(both.map((result: any) => result.kind)).to.include('message');
    expect(both.every((result: any) => /Lyon/.test(result.excerpt))).to.equal(true);
    expect((await invoke('memory.search', { query: 'Lyon roses' })).body.result.results, 'every word must occur').to.deep.equal([]);

    // Read one whole, with what came before and after it.
    const message = results.find((result) => result.kind === 'message' && result.excerpt.includes('tomatoes'));
    const whole = (await invoke('memory.get', { id: message.id })).body.result;
    expect(whole.text).to.equal('My favourite colour is teal, and the tomatoes need water on Fridays.');
    expect(whole.after.map((one: any) => one.text)).to.deep.equal(['Noted: teal, and Friday watering.', 'What about the roses?']);
    const note = (await invoke('memory.get', { id: results[0].id })).body.result;
    expect(note.text).to.equal('Sam prefers teal mugs over white ones.');

    // Another agent's message, by its id: as if it did not exist.
    const history = (await home.run(['sessions', 'list', '--json'])).json.sessions as any[];
    const vault = history.find((session: any) => session.key.includes('vault'));
    const vaultMessages = (await home.run(['sessions', 'show', vault.key, '--json'])).json.messages as any[];
    const foreign = await invoke('memory.get', { id: `message:${vaultMessages[0].id}` });
    expect(foreign.status).to.equal(404);

    // Search syntax of either engine is taken as words, never as operators.
    for (const query of ['teal OR launch*', 'NEAR(teal launch)', '"teal', 'teal -roses', 'teal:*', "teal' OR '1'='1"]) {
      const safe = await invoke('memory.search', { query });
      expect(safe.status, query).to.equal(200);
      expect(JSON.stringify(safe.body.result.results), query).to.not.include('launch code');
    }
    expect((await invoke('memory.search', { query: '!!! ???' })).status).to.equal(400);
  });
});
