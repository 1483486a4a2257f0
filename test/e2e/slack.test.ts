import { expect } from 'chai';
import { freePort, Home, sleep, waitFor } from '../support/cli.ts';
import { startModelServer } from '../support/model-server.ts';
import { openaiText, ScriptedUpstream, answerHoldingOnce } from '../support/scripted-upstream.ts';
import { SlackApi } from '../support/slack-api.ts';

const ROOM = 'C0GENERAL1';

/** Slack's official SDK (Socket Mode and the Web API) against a stand-in of Slack: what the app sends is what Slack would receive. */
describe('Slack channel (e2e, its Socket Mode client and @slack/web-api against a stand-in of Slack)', function () {
  this.timeout(120_000);
  let slack: SlackApi;
  let home: Home;
  let upstream: ScriptedUpstream;
  let serial = 0;
  let port = 0;

  const json = (args: string[]) => home.json(args);
  const set = (key: string, value: unknown) => home.set(key, value);
  const account = async () => (await json(['channels', 'status'])).channels.find((c: any) => c.channel === 'slack');
  const connected = () => waitFor(async () => ((await account())?.state === 'connected' ? true : undefined), 20_000, 'the app to connect');
  const texts = (channel: string) => slack.posted(channel).map((call) => String(call.body.text));
  const replyIn = (channel: string, after: number, pattern: RegExp = /\S/) =>
    waitFor(() => texts(channel).slice(after).find((text) => pattern.test(text)), 30_000, `a message in ${channel} matching ${pattern}`);
  const person = () => {
    serial++;
    return { user: slack.user(`U0PERSON${serial}`, `Ann ${serial}`), name: `Ann ${serial}`, dm: `D0DIRECT${serial}` };
  };

  beforeEach(async () => {
    slack = await new SlackApi().start();
    upstream = await new ScriptedUpstream().start();
    port = await freePort();
    home = new Home({ GATEWAY_PORT: String(port) });
    await set('channels.slack', { enabled: true, apiRoot: slack.apiRoot, rooms: [ROOM], reconnectMaxDelayMs: 2000 });
    await set('models.providers.script', { kind: 'openai-compatible', baseUrl: upstream.url, models: ['m'], retries: { max: 0 } });
    await set('agents.helper', { model: 'script/m' });
    for (const [name, value] of [['botToken', slack.botToken], ['appToken', slack.appToken]]) {
      expect((await home.run(['secrets', 'set', `channels.slack.${name}`], { input: value })).code).to.equal(0);
    }
    const started = await home.run(['start']);
    expect(started.code, started.stderr).to.equal(0);
    await connected();
  });
  afterEach(async () => {
    home.cleanup();
    await slack.stop();
    await upstream.stop();
  });

  it('a stranger gets a code and nothing else; approved, they are answered by the agent with the real model; the session records the reply\'s ts', async () => {
    const model = await startModelServer();
    try {
      await set('models.providers.local', { kind: 'openai-compatible', baseUrl: model.url, models: ['stories'] });
      await set('agents.story', { model: 'local/stories', maxOutputTokens: 12 });
      await set('channels.slack.agent', 'story');
      const expected = await (await fetch(`${model.url}/chat/completions`, { method: 'POST', body: JSON.stringify({ model: 'stories', messages: [{ role: 'user', content: 'Once upon a time' }], max_tokens: 12 }) })).json() as any;
      const story = String(expected.choices[0].message.content).trim();
      expect(await account()).to.include({ state: 'connected', detail: `@${slack.botName}` });

      const ann = person();
      slack.message({ user: ann.user, channel: ann.dm, text: 'hello?' });
      const codeText = await replyIn(ann.dm, 0, /pairing code is/);
      const code = /pairing code is ([A-Z2-9]{8})/.exec(codeText)![1]!;
      expect(codeText).to.include(`gateway pair approve slack ${code}`);
      await sleep(1000);
      expect(texts(ann.dm)).to.have.length(1);
      expect(upstream.requests).to.have.length(0);
      expect((await json(['pair', 'list', 'slack'])).requests[0]).to.include({ channel: 'slack', code, sender: ann.user });

      expect(await json(['pair', 'approve', 'slack', code, '--notify'])).to.include({ approved: true, notified: true });
      expect(String(slack.posted(ann.user)[0]?.body.text)).to.match(/approved/);

      slack.message({ user: ann.user, channel: ann.dm, text: 'Once upon a time' });
      expect(await replyIn(ann.dm, 1)).to.equal(story.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;'));
      const shown = await json(['sessions', 'show', `slack:default:dm:${ann.user}`]);
      const last = shown.messages.at(-1);
      expect(last.delivery).to.include({ status: 'sent', to: ann.dm });
      expect(last.delivery.receipts[0]).to.match(/^\d+\.\d{6}$/);
      // Every event was acknowledged once it was stored.
      await waitFor(() => (slack.acked.length >= 2 ? true : undefined), 10_000, 'the acknowledgements');
    } finally {
      model.stop();
    }
  });

  it('in a channel, answers a mention once (message and app_mention), in its thread, in mrkdwn, and only in the rooms it may answer in', async () => {
    await set('channels.slack.agent', 'helper');
    const bob = person();
    upstream.responder = (request) => openaiText(`**Answer**: ${String(request.body.messages.at(-1).content)}`);
    slack.message({ user: bob.user, channel: ROOM, text: 'just chatting' });
    await sleep(1500);
    expect(texts(ROOM)).to.deep.equal([]);

    const mention = slack.message({ user: bob.user, channel: ROOM, text: `<@${slack.botUserId}> is the deploy done?` });
    const ts = (mention.payload.event as { ts: string }).ts;
    // Slack sends a mention twice: as a message and as an app_mention, for one message.
    slack.event({ type: 'app_mention', user: bob.user, channel: ROOM, text: `<@${slack.botUserId}> is the deploy done?`, ts, event_ts: ts });
    expect(await replyIn(ROOM, 0)).to.equal(`*Answer*: ${bob.name}: is the deploy done?`);
    const call = slack.posted(ROOM)[0]!;
    expect(call.body.thread_ts, 'in the thread of the mention').to.equal(ts);
    await sleep(1500);
    expect(texts(ROOM), 'answered once').to.have.length(1);

    slack.channel('C0ELSEWHERE');
    slack.message({ user: bob.user, channel: 'C0ELSEWHERE', text: `<@${slack.botUserId}> hello` });
    await sleep(1500);
    expect(texts('C0ELSEWHERE')).to.deep.equal([]);
    expect(upstream.requests).to.have.length(1);
  });

  it('files reach the agent only from whom it answers: a mention\'s image as an image, fetched with the bot token; chatter\'s and strangers\' files never fetched', async () => {
    await set('channels.slack.agent', 'helper');
    await set('models.providers.script.imageModels', ['*']);
    upstream.responder = () => openaiText('Got it.');
    const png = Uint8Array.from({ length: 3000 }, (_, index) => [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a][index] ?? index % 251);
    const fetched = () => slack.calls.filter((call) => call.method === 'file').map((call) => call.body.id);
    const bob = person();

    const chatter = slack.file(png, 'chatter.png', 'image/png');
    slack.message({ user: bob.user, channel: ROOM, text: 'look at this', files: [chatter] });
    const stranger = person();
    const secret = slack.file(png, 'stranger.png', 'image/png');
    slack.message({ user: stranger.user, channel: stranger.dm, text: '', files: [secret] });
    expect(await replyIn(stranger.dm, 0), 'a stranger sending only a file still gets a code').to.match(/pairing code is/);

    const shot = slack.file(png, 'screenshot.png', 'image/png');
    slack.message({ user: bob.user, channel: ROOM, text: `<@${slack.botUserId}> what is wrong here?`, files: [shot] });
    expect(await replyIn(ROOM, 0)).to.equal('Got it.');
    const parts = upstream.requests.at(-1)!.body.messages.at(-1).content as any[];
    expect(parts[0]).to.deep.equal({ type: 'text', text: `${bob.name}: what is wrong here?` });
    expect(parts[1].image_url.url).to.equal(`data:image/png;base64,${Buffer.from(png).toString('base64')}`);
    expect(fetched(), 'only the file of the message the agent answers').to.deep.equal([shot.id]);
    expect(slack.calls.find((call) => call.method === 'file')!.token).to.equal(slack.botToken);

    const room = await json(['sessions', 'show', `slack:default:group:${ROOM}`]);
    const named = room.messages.filter((message: any) => message.data?.attachments).map((message: any) => message.data.attachments[0]);
    expect(named.map((file: any) => [file.name, file.kept, file.note ?? null])).to.deep.equal([
      ['chatter.png', false, 'not kept: the message was not addressed to the agent'], ['screenshot.png', true, null],
    ]);
  });

  it('with streaming on, the reply in the thread grows in one message (chat.update) and ends holding all of it', async () => {
    await set('channels.slack.agent', 'helper');
    await set('channels.slack.streaming', true);
    const bob = person();
    const answer = Array.from({ length: 10 }, (_, index) => `Step ${index + 1} is done.`).join(' ');
    upstream.enqueue(openaiText(answer, undefined, { pieces: 10, gapMs: 300 }));
    slack.message({ user: bob.user, channel: ROOM, text: `<@${slack.botUserId}> status?` });
    await waitFor(() => (slack.updated(ROOM).some((call) => call.body.text === answer) ? true : undefined), 30_000, 'the whole answer in the message');
    const posted = slack.posted(ROOM);
    expect(posted, 'one message in the thread, edited').to.have.length(1);
    const updates = slack.updated(ROOM);
    expect(updates.length).to.be.at.least(2);
    const ts = await waitFor(async () => (await json(['sessions', 'show', `slack:default:group:${ROOM}`])).messages.at(-1).delivery?.receipts[0], 10_000, 'the delivery');
    expect(updates.every((call) => call.body.ts === ts)).to.equal(true);
    expect([posted[0]!.body.text, ...updates.map((call) => call.body.text)].every((text) => answer.startsWith(String(text)))).to.equal(true);
  });

  it('over the Events API, answers only requests Slack signed within five minutes, refuses JSON nested too deep as every route does, stores an event before the 200, and answers a redelivery once', async () => {
    await set('channels.slack.agent', 'helper');
    await set('channels.slack.events', 'http');
    expect((await home.run(['restart'])).code).to.equal(0);
    const waiting = await waitFor(async () => ((await account())?.state === 'error' ? account() : undefined), 20_000, 'the account to want its signing secret');
    expect(waiting.detail).to.include('gateway secrets set channels.slack.signingSecret');
    expect((await home.run(['secrets', 'set', 'channels.slack.signingSecret'], { input: slack.signingSecret })).code).to.equal(0);
    expect((await home.run(['restart'])).code).to.equal(0);
    await connected();
    expect((await account()).detail).to.match(/\(Events API\)$/);
    const url = `http://127.0.0.1:${port}/channels/slack/default/webhook`;
    upstream.responder = (request) => openaiText(`Answer: ${String(request.body.messages.at(-1).content)}`);

    // Slack checks the address once with a challenge.
    expect(await slack.post(url, { type: 'url_verification', token: 'x', challenge: 'c-123' })).to.deep.equal({ status: 200, body: { challenge: 'c-123' } });

    const cy = person();
    await set('channels.slack.allowFrom', [cy.user]);
    const event = slack.eventCallback({ user: cy.user, channel: cy.dm, text: 'over http' });
    expect((await slack.post(url, event)).status).to.equal(200);
    expect(await replyIn(cy.dm, 0)).to.equal('Answer: over http');
    // Slack retries what it thinks timed out: stored once, answered once.
    expect((await slack.post(url, event, { retry: 1 })).status).to.equal(200);

    const forged = slack.eventCallback({ user: cy.user, channel: cy.dm, text: 'forged' });
    expect((await slack.post(url, forged, { secret: 'not-the-signing-secret' })).status).to.equal(401);
    expect((await slack.post(url, forged, { timestamp: Math.floor(Date.now() / 1000) - 600 })).status, 'a replay from ten minutes ago').to.equal(401);
    const unsigned = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(forged) });
    expect(unsigned.status).to.equal(401);
    // Signed, but nested deeper than any route of the gateway takes: the same 400 as elsewhere.
    const deep = await slack.post(url, `{"type":"event_callback","event":${'{"a":'.repeat(10_000)}1${'}'.repeat(10_000)}}`);
    expect(deep.status).to.equal(400);
    expect(deep.body).to.deep.equal({ error: 'bad_request', message: 'The body nests deeper than 64 levels; the gateway takes at most 64.', statusCode: 400 });
    expect((await slack.post(url, '{"type":')).body).to.include({ statusCode: 400, message: 'The body is not valid JSON.' });
    await sleep(1000);
    expect(texts(cy.dm)).to.deep.equal(['Answer: over http']);
    const session = await json(['sessions', 'show', `slack:default:dm:${cy.user}`]);
    expect(session.messages.filter((m: any) => m.direction === 'in').map((m: any) => m.text)).to.deep.equal(['over http']);

    // Slack's Web API out of reach: what the operator says is queued, and posted once when Slack answers again.
    await slack.stop();
    const queued = await home.run(['message', 'send', '--channel', 'slack', '--to', cy.dm, 'Said while Slack was away', '--json']);
    expect(queued.code, queued.stderr).to.equal(0);
    expect(queued.json, JSON.stringify(queued.json)).to.include({ sent: false });
    await slack.start(slack.port);
    await replyIn(cy.dm, 1, /Said while Slack was away/);
    await sleep(1500);
    expect(texts(cy.dm)).to.deep.equal(['Answer: over http', 'Said while Slack was away']);
  });

  it('waits as long as a 429 says, and splits a reply past 40,000 characters without breaking its code block', async () => {
    const cat = person();
    await set('channels.slack.allowFrom', [cat.user]);
    await set('channels.slack.agent', 'helper');
    const prose = 'A long explanation. '.repeat(2100);
    const code = Array.from({ length: 120 }, (_, index) => `echo step ${index}`).join('\n');
    upstream.enqueue(openaiText(`${prose}\n\n\`\`\`sh\n${code}\n\`\`\`\n\nDone.`, undefined, { pieces: 60 }));
    slack.fail('chat.postMessage', { status: 429, retryAfter: 2 });
    slack.message({ user: cat.user, channel: cat.dm, text: 'explain' });
    // The call refused with the 429, then the two parts.
    await waitFor(() => (slack.posted(cat.dm, { all: true }).length >= 3 ? true : undefined), 30_000, 'both parts');
    const calls = slack.posted(cat.dm, { all: true });
    expect(calls[0]!.refused).to.equal(true);
    expect(calls[1]!.at - calls[0]!.at, 'no sooner than Retry-After').to.be.at.least(2000);
    const parts = calls.slice(1).map((call) => String(call.body.text));
    expect(parts).to.have.length(2);
    for (const part of parts) {
      expect(part.length).to.be.at.most(40_000);
      expect((part.match(/```/g) ?? []).length % 2, 'whole code blocks').to.equal(0);
    }
    expect(parts.join('\n')).to.include('echo step 0').and.to.include('echo step 119').and.to.include('Done.');
  });

  it('kill -9 with events in flight: what was not acknowledged comes again, and every message is answered exactly once', async () => {
    const dan = person();
    await set('channels.slack.allowFrom', [dan.user]);
    await set('channels.slack.agent', 'helper');
    // The third question's model call waits until the kill.
    const answering = answerHoldingOnce('question 3');
    upstream.responder = answering.responder;
    const questions = Array.from({ length: 6 }, (_, index) => `question ${index + 1}`);
    for (const question of questions) slack.message({ user: dan.user, channel: dan.dm, text: question });
    await waitFor(async () => (answering.held() && texts(dan.dm).length >= 2
      && (await json(['sessions', 'show', `slack:default:dm:${dan.user}`])).messages.filter((m: any) => m.delivery?.status === 'sent').length >= 2 ? true : undefined),
    30_000, 'two answers sent, and the third run waiting on its model');
    process.kill(home.lock().pid, 'SIGKILL');
    slack.message({ user: dan.user, channel: dan.dm, text: 'question 7' });
    questions.push('question 7');
    const started = await home.run(['start']);
    expect(started.code, started.stderr).to.equal(0);
    await waitFor(() => (texts(dan.dm).length >= questions.length ? true : undefined), 60_000, 'every answer');
    await sleep(2000);
    expect([...texts(dan.dm)].sort()).to.deep.equal(questions.map((question) => `Answer: ${question}`).sort());
    const session = await json(['sessions', 'show', `slack:default:dm:${dan.user}`]);
    expect(session.messages.filter((m: any) => m.direction === 'in').map((m: any) => m.text)).to.deep.equal(questions);
  });

  it('a revoked token puts the account in error with Slack\'s reason, and the daemon keeps serving; malformed events harm nothing', async () => {
    await set('channels.slack.agent', 'helper');
    const eve = person();
    await set('channels.slack.allowFrom', [eve.user]);
    slack.event({ type: 'message', subtype: 'message_changed', channel: eve.dm, ts: '1.000001' });
    slack.event({ type: 'message', channel: eve.dm, ts: '1.000002' });
    slack.event({ type: 'reaction_added', user: eve.user, reaction: 'eyes' });
    slack.event({ type: 'message', user: eve.user, channel: 12, text: ['not', 'text'], ts: 'soon' });
    slack.event({ type: 'message', user: eve.user, channel: eve.dm, text: 'y'.repeat(60_000), ts: '1.000003' });
    slack.fail('chat.postMessage', { status: 500 });
    slack.message({ user: eve.user, channel: eve.dm, text: 'still there?' });
    await waitFor(() => (texts(eve.dm).filter((text) => text === 'Hello from the script.').length === 2 ? true : undefined), 30_000, 'both answers after the 500')
      .catch(async (error: Error) => { throw new Error(`${error.message}: posted ${JSON.stringify(texts(eve.dm))}; log ${(await home.run(['logs', '-n', '40', '--raw'])).stdout}`); });
    const shown = await json(['sessions', 'show', `slack:default:dm:${eve.user}`]);
    expect(shown.messages.filter((m: any) => m.direction === 'in').map((m: any) => m.text.length)).to.deep.equal([40_000, 'still there?'.length]);

    slack.revoke(slack.appToken);
    await waitFor(async () => ((await account()).state === 'error' ? true : undefined), 30_000, 'the account to report the refused token');
    const refused = await account();
    expect(refused.detail).to.include('invalid_auth').and.to.include('gateway secrets set channels.slack.botToken');
    const status = await home.run(['status', '--json']);
    expect(status.code).to.equal(0);
    const log = (await home.run(['logs', '-n', '500', '--raw'])).stdout;
    expect(log).to.not.include('stand-in-app-token').and.to.not.include('stand-in-bot-token');
  });
});
