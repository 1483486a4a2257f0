import { expect } from 'chai';
import { freePort, Home, sleep, waitFor } from '../support/cli.ts';
import { DiscordApi, nextId, type DiscordUser } from '../support/discord-api.ts';
import { startModelServer } from '../support/model-server.ts';
import { openaiText, ScriptedUpstream, answerHoldingOnce } from '../support/scripted-upstream.ts';

/** The gateway's Discord client against a stand-in of Discord's Gateway and REST API: what the bot sends is what Discord would receive. */
describe('Discord channel (e2e, the Gateway and REST API of a stand-in of Discord)', function () {
  this.timeout(120_000);
  let discord: DiscordApi;
  let home: Home;
  let upstream: ScriptedUpstream;
  let room: string;
  let serial = 0;

  const json = (args: string[]) => home.json(args);
  const set = (key: string, value: unknown) => home.set(key, value);
  const account = async () => (await json(['channels', 'status'])).channels.find((c: any) => c.channel === 'discord');
  const connected = () => waitFor(async () => ((await account())?.state === 'connected' ? true : undefined), 20_000, 'the bot to connect');
  const texts = (channel: string) => discord.sent(channel).map((call) => String(call.body.content));
  const replyIn = (channel: string, after: number, pattern: RegExp = /\S/) =>
    waitFor(() => texts(channel).slice(after).find((text) => pattern.test(text)), 30_000, `a message in ${channel} matching ${pattern}`);
  const person = (): DiscordUser & { dm: string } => {
    const user = { id: nextId(), username: `ann${++serial}`, global_name: `Ann ${serial}` };
    return { ...user, dm: discord.dmOf(user) };
  };
  const dm = (user: DiscordUser & { dm: string }, content: string) => discord.message({ author: user, channel: user.dm, content });

  beforeEach(async () => {
    discord = await new DiscordApi().start();
    room = discord.channel();
    upstream = await new ScriptedUpstream().start();
    home = new Home({ GATEWAY_PORT: String(await freePort()) });
    await set('channels.discord', { enabled: true, apiRoot: discord.apiRoot, rooms: [room], reconnectMaxDelayMs: 2000 });
    await set('models.providers.script', { kind: 'openai-compatible', baseUrl: upstream.url, models: ['m'], retries: { max: 0 } });
    await set('agents.helper', { model: 'script/m' });
    expect((await home.run(['secrets', 'set', 'channels.discord.botToken'], { input: discord.token })).code).to.equal(0);
    const started = await home.run(['start']);
    expect(started.code, started.stderr).to.equal(0);
    await connected();
  });
  afterEach(async () => {
    home.cleanup();
    await discord.stop();
    await upstream.stop();
  });

  it('a stranger gets a code and nothing else; approved, they are answered by the agent with the real model; the session records the reply\'s id', async () => {
    const model = await startModelServer();
    try {
      await set('models.providers.local', { kind: 'openai-compatible', baseUrl: model.url, models: ['stories'] });
      await set('agents.story', { model: 'local/stories', maxOutputTokens: 12 });
      await set('channels.discord.agent', 'story');
      const expected = await (await fetch(`${model.url}/chat/completions`, { method: 'POST', body: JSON.stringify({ model: 'stories', messages: [{ role: 'user', content: 'Once upon a time' }], max_tokens: 12 }) })).json() as any;
      const story = String(expected.choices[0].message.content).trim();
      expect(await account()).to.include({ state: 'connected', detail: `@${discord.bot.username}` });
      // The intents a gateway needs: guilds, guild and direct messages, and their content.
      expect(discord.identifies[0]).to.equal(1 | (1 << 9) | (1 << 12) | (1 << 15));

      const ann = person();
      dm(ann, 'hello?');
      const codeText = await replyIn(ann.dm, 0, /pairing code is/);
      const code = /pairing code is ([A-Z2-9]{8})/.exec(codeText)![1]!;
      await sleep(1000);
      expect(texts(ann.dm)).to.have.length(1);
      expect(upstream.requests).to.have.length(0);
      expect((await json(['pair', 'list', 'discord'])).requests[0]).to.include({ channel: 'discord', code, sender: ann.id, senderName: ann.global_name });
      expect(await json(['pair', 'approve', 'discord', code, '--notify'])).to.include({ approved: true, notified: true });
      expect(await replyIn(ann.dm, 1)).to.match(/approved/);

      dm(ann, 'Once upon a time');
      expect(await replyIn(ann.dm, 2)).to.equal(story);
      const call = discord.sent(ann.dm).at(-1)!;
      expect(call.body.allowed_mentions, 'replies never ping anyone').to.deep.equal({ parse: [] });
      expect(call.body.enforce_nonce).to.equal(true);
      expect(discord.calls.some((c) => c.path === `/channels/${ann.dm}/typing`)).to.equal(true);
      const last = (await json(['sessions', 'show', `discord:default:dm:${ann.id}`])).messages.at(-1);
      expect(last.delivery).to.include({ status: 'sent', to: ann.dm });
      expect(last.delivery.receipts[0]).to.match(/^\d{17,20}$/);
    } finally {
      model.stop();
    }
  });

  it('in a guild channel, answers a mention or a reply to the bot, as a reply to that message, only in its rooms; splits at 2,000 without breaking code', async () => {
    await set('channels.discord.agent', 'helper');
    const bob = person();
    upstream.responder = (request) => openaiText(`Answer: ${String(request.body.messages.at(-1).content)}`);
    discord.message({ author: bob, channel: room, content: 'just chatting', guild: true });
    await sleep(1500);
    expect(texts(room)).to.deep.equal([]);

    const mention = discord.message({ author: bob, channel: room, content: `<@${discord.bot.id}> is the deploy done?`, guild: true, mentionsBot: true });
    expect(await replyIn(room, 0)).to.equal(`Answer: ${bob.global_name}: is the deploy done?`);
    expect(discord.sent(room)[0]!.body.message_reference).to.include({ message_id: mention.id });
    discord.message({ author: bob, channel: room, content: 'and the tests?', guild: true, replyTo: { id: nextId(), author: discord.bot } });
    expect(await replyIn(room, 1)).to.equal(`Answer: ${bob.global_name}: and the tests?`);

    const other = discord.channel();
    discord.message({ author: bob, channel: other, content: `<@${discord.bot.id}> hello`, guild: true, mentionsBot: true });
    await sleep(1500);
    expect(texts(other)).to.deep.equal([]);

    const code = Array.from({ length: 150 }, (_, index) => `SELECT ${index} AS step;`).join('\n');
    upstream.enqueue(openaiText(`Here it is.\n\n\`\`\`sql\n${code}\n\`\`\`\n\nRun it.`, undefined, { pieces: 20 }));
    discord.message({ author: bob, channel: room, content: `<@${discord.bot.id}> the query?`, guild: true, mentionsBot: true });
    await waitFor(() => (texts(room).some((text) => text.includes('Run it.')) ? true : undefined), 30_000, 'the last part');
    const parts = texts(room).slice(2);
    expect(parts.length).to.be.at.least(2);
    for (const part of parts) {
      expect(part.length).to.be.at.most(2000);
      expect((part.match(/```/g) ?? []).length % 2).to.equal(0);
    }
    expect(parts.filter((part) => part.includes('```sql')).length).to.be.at.least(2);
  });

  it('attachments reach the agent: an image as an image, a CSV as text, one from elsewhere than Discord\'s CDN never fetched, one whose bytes are no image not passed off as one', async () => {
    const fay = person();
    await set('channels.discord.allowFrom', [fay.id]);
    await set('channels.discord.agent', 'helper');
    await set('models.providers.script.imageModels', ['m']);
    upstream.responder = () => openaiText('Noted.');
    const gif = Uint8Array.from({ length: 800 }, (_, index) => [0x47, 0x49, 0x46, 0x38, 0x39, 0x61][index] ?? index % 200);
    const picture = discord.attachment(gif, 'cat.gif', 'image/gif');
    const table = discord.attachment(new TextEncoder().encode('name,count\nbolts,4\n'), 'stock.csv', 'text/csv; charset=utf-8');
    const elsewhere = { ...discord.attachment(gif, 'tracker.gif', 'image/gif'), url: 'http://192.0.2.1/tracker.gif' };
    const fake = discord.attachment(new TextEncoder().encode('#!/bin/sh\necho not a picture\n'), 'photo.png', 'image/png');
    discord.message({ author: fay, channel: fay.dm, content: 'count these', attachments: [picture, table, elsewhere, fake] });
    expect(await replyIn(fay.dm, 0)).to.equal('Noted.');
    const parts = upstream.requests.at(-1)!.body.messages.at(-1).content as any[];
    expect(parts.map((part) => part.type)).to.deep.equal(['text', 'image_url']);
    expect(parts[1].image_url.url).to.equal(`data:image/gif;base64,${Buffer.from(gif).toString('base64')}`);
    expect(parts[0].text.split('\n')).to.deep.equal([
      'count these',
      '[file stock.csv (text/csv, 19 bytes)]', 'Content of stock.csv:', 'name,count', 'bolts,4', '',
      "[image tracker.gif (image/gif, 800 bytes): not kept: it could not be fetched (files are fetched only from Discord's CDN, not 192.0.2.1)]",
      '[file photo.png (application/octet-stream, 29 bytes)]',
    ]);
    const fetched = discord.calls.filter((call) => call.path.startsWith('/attachments/'));
    expect(fetched).to.have.length(3);
    expect(fetched.every((call) => call.token === ''), 'no token goes to the CDN').to.equal(true);
  });

  it('with streaming on, the reply grows in one message (edited) and ends holding all of it', async () => {
    const gil = person();
    await set('channels.discord.allowFrom', [gil.id]);
    await set('channels.discord.agent', 'helper');
    await set('channels.discord.streaming', true);
    const answer = Array.from({ length: 10 }, (_, index) => `Line ${index + 1} of the answer.`).join(' ');
    upstream.enqueue(openaiText(answer, undefined, { pieces: 10, gapMs: 300 }));
    dm(gil, 'go on');
    await waitFor(() => (discord.edited(gil.dm).some((call) => call.body.content === answer) ? true : undefined), 30_000, 'the whole answer in the message');
    expect(discord.sent(gil.dm), 'one message, edited').to.have.length(1);
    expect(discord.edited(gil.dm).length).to.be.at.least(2);
    expect(discord.edited(gil.dm).every((call) => answer.startsWith(String(call.body.content)))).to.equal(true);
  });

  it('waits as long as a 429 says; a dropped connection resumes its session and gets what it missed, once', async () => {
    const cat = person();
    await set('channels.discord.allowFrom', [cat.id]);
    await set('channels.discord.agent', 'helper');
    upstream.responder = (request) => openaiText(`Answer: ${String(request.body.messages.at(-1).content)}`);
    discord.fail('POST /channels/:id/messages', { status: 429, retryAfter: 1.5 });
    dm(cat, 'first');
    await replyIn(cat.dm, 0, /first/);
    const calls = discord.sent(cat.dm, { all: true });
    expect(calls[0]!.refused).to.equal(true);
    expect(calls[1]!.at - calls[0]!.at).to.be.at.least(1500);
    expect(calls[1]!.body.nonce, 'a retry carries the same nonce').to.equal(calls[0]!.body.nonce);

    discord.drop();
    dm(cat, 'while away');
    await replyIn(cat.dm, 1, /while away/);
    expect(discord.resumes, 'resumed, not identified again').to.have.length(1);
    expect(discord.identifies).to.have.length(1);
    discord.askReconnect();
    dm(cat, 'after a reconnect');
    await replyIn(cat.dm, 2, /after a reconnect/);
    await sleep(1000);
    expect(texts(cat.dm)).to.deep.equal(['Answer: first', 'Answer: while away', 'Answer: after a reconnect']);
  });

  it('gateway message send while Discord is out of reach is queued, and posted once when the account is back', async () => {
    await discord.stop();
    await waitFor(async () => ((await account())?.state !== 'connected' ? true : undefined), 20_000, 'the account to notice');
    const queued = await home.run(['message', 'send', '--channel', 'discord', '--to', room, 'Said while Discord was away', '--json']);
    expect(queued.code, queued.stderr).to.equal(0);
    expect(queued.json, JSON.stringify(queued.json)).to.include({ sent: false });
    await discord.start(discord.port);
    await connected();
    await replyIn(room, 0, /Said while Discord was away/);
    await sleep(1500);
    expect(texts(room), 'posted once').to.deep.equal(['Said while Discord was away']);
  });

  it('kill -9 with messages in flight: the next daemon resumes the session, and every message is answered exactly once', async () => {
    const dan = person();
    await set('channels.discord.allowFrom', [dan.id]);
    await set('channels.discord.agent', 'helper');
    // The third question's model call waits until the kill.
    const answering = answerHoldingOnce('question 3');
    upstream.responder = answering.responder;
    const questions = Array.from({ length: 6 }, (_, index) => `question ${index + 1}`);
    for (const question of questions) dm(dan, question);
    await waitFor(async () => (answering.held() && texts(dan.dm).length >= 2
      && (await json(['sessions', 'show', `discord:default:dm:${dan.id}`])).messages.filter((m: any) => m.delivery?.status === 'sent').length >= 2 ? true : undefined),
    30_000, 'two answers sent, and the third run waiting on its model');
    process.kill(home.lock().pid, 'SIGKILL');
    dm(dan, 'question 7');
    questions.push('question 7');
    const started = await home.run(['start']);
    expect(started.code, started.stderr).to.equal(0);
    await waitFor(() => (texts(dan.dm).length >= questions.length ? true : undefined), 60_000, 'every answer');
    await sleep(2000);
    expect([...texts(dan.dm)].sort()).to.deep.equal(questions.map((question) => `Answer: ${question}`).sort());
    expect(discord.resumes.length, 'the new daemon resumed the session').to.be.at.least(1);
    const session = await json(['sessions', 'show', `discord:default:dm:${dan.id}`]);
    expect(session.messages.filter((m: any) => m.direction === 'in').map((m: any) => m.text)).to.deep.equal(questions);
  });

  it('a revoked token puts the account in error with Discord\'s reason, and the daemon keeps serving; malformed dispatches harm nothing', async () => {
    await set('channels.discord.agent', 'helper');
    const eve = person();
    await set('channels.discord.allowFrom', [eve.id]);
    discord.dispatch('MESSAGE_CREATE', { id: nextId(), channel_id: eve.dm, author: eve, content: '', type: 0, timestamp: 'x', mentions: [] });
    discord.dispatch('MESSAGE_CREATE', { id: nextId(), channel_id: eve.dm, type: 7, author: eve, content: 'joined', timestamp: new Date().toISOString() });
    discord.dispatch('MESSAGE_CREATE', null);
    discord.dispatch('PRESENCE_UPDATE', { user: { id: eve.id } });
    discord.dispatch('MESSAGE_CREATE', { id: nextId(), channel_id: eve.dm, author: { ...eve, bot: true }, content: 'a bot', type: 0, timestamp: new Date().toISOString() });
    discord.dispatch('MESSAGE_CREATE', { id: nextId(), channel_id: eve.dm, author: eve, content: 'z'.repeat(20_000), type: 0, timestamp: 'not a time', mentions: [] });
    discord.fail('POST /channels/:id/messages', { status: 502, message: '502: Bad Gateway' });
    dm(eve, 'still there?');
    await waitFor(() => (texts(eve.dm).filter((text) => text === 'Hello from the script.').length === 2 ? true : undefined), 30_000, 'both answers after the 502');
    const shown = await json(['sessions', 'show', `discord:default:dm:${eve.id}`]);
    expect(shown.messages.filter((m: any) => m.direction === 'in').map((m: any) => m.text.length)).to.deep.equal([16_384, 'still there?'.length]);

    discord.revoke(discord.token);
    const refused = await waitFor(async () => {
      const status = await account();
      return status.state === 'error' ? status : undefined;
    }, 30_000, 'the account to report the refused token');
    // Discord's reason: the Gateway's close (4004), or, once the account has tried again, the REST API's 401.
    expect(refused.detail).to.match(/Discord refused the bot token \((Authentication failed|401: Unauthorized)/).and.to.include('gateway secrets set channels.discord.botToken');
    expect((await home.run(['status', '--json'])).code).to.equal(0);
    expect((await home.run(['logs', '-n', '500', '--raw'])).stdout).to.not.include('bot-token-value');
  });
});
