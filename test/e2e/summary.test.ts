import { expect } from 'chai';
import { freePort, Home } from '../support/cli.ts';
import { openaiText, ScriptedUpstream, type Received } from '../support/scripted-upstream.ts';

/** The system text of an OpenAI-shaped request. */
const systemOf = (request: Received) => (request.body.messages as { role: string; content: string }[]).filter((m) => m.role === 'system').map((m) => m.content).join('\n');
const isSummary = (request: Received) => systemOf(request).startsWith('You summarise a conversation');

describe('long conversations: older turns summarised into a stored summary, the originals kept (e2e)', function () {
  this.timeout(60_000);
  let home: Home;
  let upstream: ScriptedUpstream;
  let summaries = 0;

  beforeEach(async () => {
    summaries = 0;
    upstream = await new ScriptedUpstream().start();
    upstream.responder = (request) => (isSummary(request) ? openaiText(`SUMMARY-${++summaries}: the user likes teal and travels to Lyon.`) : openaiText(`answer ${upstream.requests.length}`));
    home = new Home({ GATEWAY_PORT: String(await freePort()) });
    for (const [key, value] of Object.entries({
      'models.providers.script': { kind: 'openai-compatible', baseUrl: upstream.url, models: ['m'], retries: { max: 0 } },
      'agents.helper': { model: 'script/m', history: 4, instructions: 'Be brief.' },
    })) expect((await home.run(['config', 'set', key, JSON.stringify(value)])).code).to.equal(0);
    expect((await home.run(['start'])).code).to.equal(0);
  });
  afterEach(async () => {
    home.cleanup();
    await upstream.stop();
  });

  it('past the window the older turns become a summary the model reads; sessions show has the summary, what it replaced, and every original', async () => {
    const say = async (text: string) => {
      const result = await home.run(['chat', '--agent', 'helper', '--session', 'long', text, '--json']);
      expect(result.code, result.stderr).to.equal(0);
      return result.json;
    };
    await say('Turn one: my favourite colour is teal.');
    await say('Turn two: I travel to Lyon next week.');
    await say('Turn three: what is the weather?');
    expect(upstream.requests.filter(isSummary), 'within the window, no summary').to.have.length(0);
    await say('Turn four: and tomorrow?');
    const summaryRequests = upstream.requests.filter(isSummary);
    expect(summaryRequests).to.have.length(1);
    const summarised = JSON.stringify(summaryRequests[0]!.body.messages);
    expect(summarised).to.include('Turn one: my favourite colour is teal.').and.to.include('Turn two: I travel to Lyon');
    // The run after the summary: the summary in its system text, the summarised turns no longer among its messages.
    const main = upstream.requests.at(-1)!;
    expect(isSummary(main)).to.equal(false);
    expect(systemOf(main)).to.include('Be brief.').and.to.include('Summary of the conversation before the messages below:\nSUMMARY-1');
    const read = JSON.stringify(main.body.messages);
    expect(read).to.not.include('Turn one').and.to.not.include('Turn two');
    expect(read).to.include('Turn three').and.to.include('Turn four');

    const key = (await home.run(['sessions', 'list', '--json'])).json.sessions.find((session: any) => session.key.endsWith(':long')).key;
    const shown = (await home.run(['sessions', 'show', key, '--json'])).json;
    const summary = shown.messages.find((message: any) => message.kind === 'summary');
    expect(summary.text).to.equal('SUMMARY-1: the user likes teal and travels to Lyon.');
    const originals = shown.messages.filter((message: any) => message.kind === 'message');
    expect(originals.map((message: any) => message.text)).to.include.members(['Turn one: my favourite colour is teal.', 'Turn two: I travel to Lyon next week.']);
    expect(originals).to.have.length(8);
    expect(summary.data.summarises).to.deep.equal({ fromId: originals[0].id, toId: originals[3].id, count: 4 });
    const text = await home.run(['sessions', 'show', key]);
    expect(text.stdout).to.match(/\[summary of 4 earlier messages, #\d+ to #\d+, kept in the session\] SUMMARY-1/);

    // On and on: the next summary builds on the last, and covers everything since the first message.
    await say('Turn five: book a hotel.');
    await say('Turn six: near the station.');
    const second = upstream.requests.filter(isSummary)[1]!;
    expect(JSON.stringify(second.body.messages)).to.include('Summary of the conversation before these messages:\\nSUMMARY-1');
    const latest = (await home.run(['sessions', 'show', key, '--json'])).json.messages.filter((message: any) => message.kind === 'summary').at(-1);
    expect(latest.data.summarises.fromId).to.equal(originals[0].id);
    expect(latest.data.summarises.count).to.equal(8);
    expect(systemOf(upstream.requests.at(-1)!)).to.include('SUMMARY-2');

    // A summary is one of the run's model calls: charged to the same caller, surface and person, so no budget misses it.
    const usage = await home.json(['usage']);
    expect(usage.total.calls).to.equal(upstream.requests.length);
    expect(usage.byPerson.map((group: any) => [group.key, group.calls])).to.deep.equal([['operator', upstream.requests.length]]);
    expect(usage.bySurface.map((group: any) => group.calls)).to.deep.equal([upstream.requests.length]);
  });

  it('a summary that fails leaves the run reading the latest turns, and it still answers', async () => {
    upstream.responder = (request) => (isSummary(request) ? { status: 500, json: { error: { message: 'summaries are down' } } } : openaiText('still answering'));
    for (const text of ['one', 'two', 'three', 'four']) {
      const result = await home.run(['chat', '--agent', 'helper', '--session', 'flaky', text, '--json']);
      expect(result.code, result.stderr).to.equal(0);
      expect(result.json.text).to.equal('still answering');
    }
    const key = (await home.run(['sessions', 'list', '--json'])).json.sessions.find((session: any) => session.key.endsWith(':flaky')).key;
    const shown = (await home.run(['sessions', 'show', key, '--json'])).json;
    expect(shown.messages.some((message: any) => message.kind === 'summary')).to.equal(false);
    expect(shown.messages.filter((message: any) => message.kind === 'message')).to.have.length(8);
  });
});
