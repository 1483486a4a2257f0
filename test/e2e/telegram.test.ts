import { expect } from 'chai';
import { freePort, Home, sleep, waitFor } from '../support/cli.ts';
import { startModelServer } from '../support/model-server.ts';
import { openaiText, ScriptedUpstream } from '../support/scripted-upstream.ts';
import { TelegramApi, type TgUser } from '../support/telegram-api.ts';

const TOKEN = '7001234567:AAH-test-token-for-the-stand-in';
const BOT = 'gw_test_bot';
const GROUP = -1001234567;

/** grammY against a stand-in of the Telegram Bot API: what the bot asks and sends is what Telegram would receive. */
describe('Telegram channel (e2e, grammY against a stand-in of the Bot API)', function () {
  this.timeout(120_000);
  let api: TelegramApi;
  let home: Home;
  let upstream: ScriptedUpstream;
  let serial = 0;

  const json = async (args: string[]) => {
    const result = await home.run([...args, '--json']);
    expect(result.code, `${args.join(' ')}: ${result.stderr}`).to.equal(0);
    return result.json;
  };
  const set = async (key: string, value: unknown) => {
    const result = await home.run(['config', 'set', key, JSON.stringify(value)]);
    expect(result.code, `${key}: ${result.stderr}`).to.equal(0);
  };
  const account = async () => (await json(['channels', 'status'])).channels.find((c: any) => c.channel === 'telegram');
  const connected = () => waitFor(async () => ((await account())?.state === 'connected' ? true : undefined), 20_000, 'the bot to connect');
  const person = (): TgUser => ({ id: 5_000_000 + ++serial, first_name: `Ann${serial}`, username: `ann_${serial}` });
  const dm = (user: TgUser, text: string) => api.message(TOKEN, { chat: { id: user.id, type: 'private', first_name: user.first_name }, from: user, text });
  const texts = (chatId: number) => api.sent(chatId).map((request) => String(request.body.text));
  const replyFor = (chatId: number, after: number, pattern: RegExp = /\S/) =>
    waitFor(() => texts(chatId).slice(after).find((text) => pattern.test(text)), 30_000, `a message to ${chatId} matching ${pattern}`);

  beforeEach(async () => {
    api = await new TelegramApi().start();
    api.addBot(TOKEN, BOT);
    upstream = await new ScriptedUpstream().start();
    home = new Home({ GATEWAY_PORT: String(await freePort()) });
    await set('channels.telegram', { enabled: true, apiRoot: api.apiRoot, rooms: [String(GROUP)], reconnectMaxDelayMs: 2000 });
    await set('models.providers.script', { kind: 'openai-compatible', baseUrl: upstream.url, models: ['m'], retries: { max: 0 } });
    await set('agents.helper', { model: 'script/m' });
    expect((await home.run(['secrets', 'set', 'channels.telegram.botToken'], { input: TOKEN })).code).to.equal(0);
    const started = await home.run(['start']);
    expect(started.code, started.stderr).to.equal(0);
    await connected();
  });
  afterEach(async () => {
    home.cleanup();
    await api.stop();
    await upstream.stop();
  });

  it('a stranger gets a code and nothing else; approved, they are answered by the agent with the real model; the session records the reply\'s Telegram id', async () => {
    const model = await startModelServer();
    try {
      await set('models.providers.local', { kind: 'openai-compatible', baseUrl: model.url, models: ['stories'] });
      await set('agents.story', { model: 'local/stories', maxOutputTokens: 12 });
      await set('channels.telegram.agent', 'story');
      const expected = await (await fetch(`${model.url}/chat/completions`, { method: 'POST', body: JSON.stringify({ model: 'stories', messages: [{ role: 'user', content: 'Once upon a time' }], max_tokens: 12 }) })).json() as any;
      const story = String(expected.choices[0].message.content).trim();

      const status = await account();
      expect(status).to.include({ state: 'connected', detail: `@${BOT}` });
      const typo = await home.run(['config', 'set', 'channels.telgram', '{"enabled":true}', '--json']);
      expect(typo.code, 'the running daemon refuses a channel id that names no kind').to.equal(2);
      expect(typo.json.error.message).to.include('did you mean telegram?');
      expect((await json(['channels', 'list'])).channels.map((c: any) => c.channel)).to.include.members(['irc', 'telegram']);

      const ann = person();
      dm(ann, 'hello?');
      const codeText = await replyFor(ann.id, 0, /pairing code is/);
      const code = /pairing code is ([A-Z2-9]{8})/.exec(codeText)![1]!;
      expect(codeText).to.include(`gateway pair approve telegram ${code}`);
      await sleep(1000);
      expect(texts(ann.id), 'the code and nothing else').to.have.length(1);
      expect(upstream.requests, 'no model call for a stranger').to.have.length(0);
      const pending = await json(['pair', 'list', 'telegram']);
      expect(pending.requests[0]).to.include({ channel: 'telegram', code, sender: String(ann.id), senderName: `@${ann.username}` });

      const approved = await json(['pair', 'approve', 'telegram', code.toLowerCase(), '--notify']);
      expect(approved).to.include({ approved: true, notified: true });
      expect(await replyFor(ann.id, 1)).to.match(/approved/);

      dm(ann, 'Once upon a time');
      const answer = await replyFor(ann.id, 2);
      expect(answer).to.equal(story);
      const sent = api.sent(ann.id).at(-1)!;
      expect(sent.body.parse_mode).to.equal('HTML');
      expect(api.requests.some((request) => request.method === 'sendChatAction' && request.body.action === 'typing' && Number(request.body.chat_id) === ann.id)).to.equal(true);

      const shown = await json(['sessions', 'show', `telegram:default:dm:${ann.id}`]);
      const last = shown.messages.at(-1);
      expect(last).to.include({ role: 'assistant', text: story });
      expect(last.delivery).to.include({ status: 'sent', to: String(ann.id) });
      expect(last.delivery.receipts).to.have.length(1);
      expect(last.delivery.receipts[0]).to.match(/^\d+$/);
      // Every update was confirmed: Telegram holds none of them any more.
      await waitFor(() => (api.unconfirmed(TOKEN).length === 0 ? true : undefined), 35_000, 'the updates to be confirmed');
    } finally {
      model.stop();
    }
  });

  it('in a group, answers only when mentioned or replied to, and only in the rooms it may answer in', async () => {
    await set('channels.telegram.agent', 'helper');
    const bob = person();
    const group = { id: GROUP, type: 'supergroup' as const, title: 'Ops' };
    upstream.responder = (request) => openaiText(`Answer: ${String(request.body.messages.at(-1).content)}`);

    api.message(TOKEN, { chat: group, from: bob, text: 'just chatting among ourselves' });
    await sleep(1500);
    expect(texts(GROUP), 'a group message without a mention is not answered').to.deep.equal([]);

    api.message(TOKEN, { chat: group, from: bob, text: `@${BOT} what is up?`, entities: [{ type: 'mention', offset: 0, length: BOT.length + 1 }] });
    expect(await replyFor(GROUP, 0)).to.equal(`Answer: @${bob.username}: what is up?`);

    const botMessage = { message_id: 1, date: 1, chat: group, from: { id: 7001234567, is_bot: true, first_name: BOT, username: BOT }, text: 'Answer' };
    api.message(TOKEN, { chat: group, from: bob, text: 'and then?', reply_to_message: botMessage });
    expect(await replyFor(GROUP, 1)).to.equal(`Answer: @${bob.username}: and then?`);

    const other = { id: -1009999999, type: 'group' as const, title: 'Elsewhere' };
    api.message(TOKEN, { chat: other, from: bob, text: `@${BOT} hello`, entities: [{ type: 'mention', offset: 0, length: BOT.length + 1 }] });
    await sleep(1500);
    expect(texts(other.id), 'a group not in channels.telegram.rooms').to.deep.equal([]);
    expect(upstream.requests).to.have.length(2);
  });

  it('splits a long reply at 4,096 characters without breaking its code block, and waits as long as a 429 says', async () => {
    const cat = person();
    await set('channels.telegram.allowFrom', [String(cat.id)]);
    await set('channels.telegram.agent', 'helper');
    const prose = 'Here is the plan, step by step. '.repeat(110);
    const code = Array.from({ length: 160 }, (_, index) => `const line${index} = compute(${index}) * 2; // keep`).join('\n');
    upstream.enqueue(openaiText(`${prose}\n\n\`\`\`ts\n${code}\n\`\`\`\n\nThat is **all**.`, undefined, { pieces: 40 }));
    api.fail('sendMessage', { status: 429, description: 'Too Many Requests: retry after 2', retryAfter: 2 });

    dm(cat, 'plan please');
    await waitFor(() => (texts(cat.id).some((text) => text.includes('<b>all</b>')) ? true : undefined), 30_000, 'the last part');
    const calls = api.sent(cat.id);
    // The first call met the 429; the next came no sooner than Telegram said.
    expect(calls[1]!.at - calls[0]!.at).to.be.at.least(2000);
    const parts = calls.slice(1).map((request) => String(request.body.text));
    expect(parts.length).to.be.at.least(3);
    for (const part of parts) {
      expect(part.replace(/<[^>]*>/g, '').replace(/&(lt|gt|amp|quot);/g, '_').length).to.be.at.most(4096);
      expect((part.match(/<pre>/g) ?? []).length, 'each piece of code is a whole block').to.equal((part.match(/<\/pre>/g) ?? []).length);
    }
    expect(parts.filter((part) => part.includes('<pre><code class="language-ts">')).length, 'the block goes on in the next message').to.be.at.least(2);
    expect(parts.join('\n')).to.include('const line0 = ').and.to.include('const line159 = ');
    expect(calls.every((request) => request.body.parse_mode === 'HTML')).to.equal(true);
  });

  it('kill -9 with messages in flight: after a restart every message is answered exactly once, none lost', async () => {
    const dan = person();
    await set('channels.telegram.allowFrom', [String(dan.id)]);
    await set('channels.telegram.agent', 'helper');
    upstream.responder = (request) => ({ ...openaiText(`Answer: ${String(request.body.messages.at(-1).content)}`), delayMs: 300 });
    const questions = Array.from({ length: 6 }, (_, index) => `question ${index + 1}`);
    for (const question of questions) dm(dan, question);
    await waitFor(() => (texts(dan.id).length >= 2 ? true : undefined), 30_000, 'two answers');
    process.kill(home.lock().pid, 'SIGKILL');
    // Meanwhile more arrive: Telegram keeps them for the next poll.
    dm(dan, 'question 7');
    questions.push('question 7');
    const started = await home.run(['start']);
    expect(started.code, started.stderr).to.equal(0);
    await waitFor(() => (texts(dan.id).length >= questions.length ? true : undefined), 60_000, 'every answer');
    await sleep(2000);
    expect([...texts(dan.id)].sort()).to.deep.equal(questions.map((question) => `Answer: ${question}`).sort());
    const session = await json(['sessions', 'show', `telegram:default:dm:${dan.id}`]);
    expect(session.messages.filter((m: any) => m.direction === 'in').map((m: any) => m.text), 'each stored once').to.deep.equal(questions);
  });

  it('a refused token puts the account in error with Telegram\'s reason, and the daemon keeps serving; malformed updates and a flaky API harm nothing', async () => {
    await set('channels.telegram.agent', 'helper');
    const eve = person();
    await set('channels.telegram.allowFrom', [String(eve.id)]);
    // Updates Telegram may send that carry no message for the bot, or a malformed one.
    api.update(TOKEN, { edited_message: { message_id: 1, date: 1, chat: { id: eve.id, type: 'private' }, text: 'edited' } });
    api.update(TOKEN, { message: { message_id: 2, date: 1, chat: { id: eve.id, type: 'private' } } });
    api.update(TOKEN, { message: { message_id: 3, date: 1, chat: { id: 1, type: 'channel' }, from: eve, text: 'a channel post' } });
    api.update(TOKEN, { message: { message_id: 4, date: 'soon', chat: { id: eve.id, type: 'private' }, from: eve, text: 'x'.repeat(100_000) } });
    api.update(TOKEN, { message: null });
    // The API falters: a 502, then an answer cut mid-body.
    api.fail('sendMessage', { status: 502, description: 'Bad Gateway' }, { cut: true });
    dm(eve, 'still there?');
    await waitFor(() => (texts(eve.id).includes('Hello from the script.') ? true : undefined), 30_000, 'the answer after the API recovered');
    const shown = await json(['sessions', 'show', `telegram:default:dm:${eve.id}`]);
    expect(shown.messages.filter((m: any) => m.direction === 'in').map((m: any) => m.text.length)).to.deep.equal([16_384, 'still there?'.length]);
    expect((await account()).state).to.equal('connected');

    api.revoke(TOKEN);
    await waitFor(async () => ((await account()).state === 'error' ? true : undefined), 20_000, 'the account to report the refused token');
    const refused = await account();
    expect(refused.detail).to.include('Unauthorized').and.to.include('gateway secrets set channels.telegram.botToken');
    expect(refused.detail).to.not.include(TOKEN.split(':')[1]);
    const status = await home.run(['status', '--json']);
    expect(status.code).to.equal(0);
    expect(status.json.rpc).to.include({ ok: true });
    const log = home.run(['logs', '-n', '500', '--raw']);
    expect((await log).stdout).to.not.include(TOKEN.split(':')[1]);
  });
});
