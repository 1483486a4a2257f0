import { expect } from 'chai';
import { freePort, Home, sleep, waitFor } from '../support/cli.ts';
import { startModelServer } from '../support/model-server.ts';
import { openaiText, ScriptedUpstream, answerHoldingOnce } from '../support/scripted-upstream.ts';
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
  let port = 0;

  const json = (args: string[]) => home.json(args);
  const set = (key: string, value: unknown) => home.set(key, value);
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
    port = await freePort();
    home = new Home({ GATEWAY_PORT: String(port) });
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

  it('photos and files reach the agent: an image to a model that takes images, named to one that does not, text files as text, an oversized file named and not kept; sessions show lists them', async () => {
    const eve = person();
    await set('channels.telegram.allowFrom', [String(eve.id)]);
    await set('channels.telegram.agent', 'helper');
    await set('channels.telegram.maxAttachmentBytes', 64 * 1024);
    await set('models.providers.script.imageModels', ['m']);
    upstream.responder = () => openaiText('Seen.');
    const chat = { id: eve.id, type: 'private' as const, first_name: eve.first_name };
    const content = () => upstream.requests.at(-1)!.body.messages.at(-1).content;
    const flat = (value: unknown) => (typeof value === 'string' ? value : (value as any[]).map((part) => part.text ?? '').join('\n'));

    // A photo comes in several sizes: the largest that fits the limit is fetched, and the model sees it.
    const jpeg = (bytes: number) => Uint8Array.from({ length: bytes }, (_, index) => [0xff, 0xd8, 0xff, 0xe0][index] ?? (index * 7) % 256);
    const small = api.addFile(jpeg(2000), 'photos/small.jpg');
    const large = api.addFile(jpeg(30_000), 'photos/large.jpg');
    const huge = api.addFile(jpeg(90_000), 'photos/huge.jpg');
    api.message(TOKEN, { chat, from: eve, caption: 'what is this?', photo: [{ ...small, width: 90, height: 90 }, { ...large, width: 800, height: 800 }, { ...huge, width: 2000, height: 2000 }] });
    await replyFor(eve.id, 0, /Seen/);
    const parts = content() as any[];
    expect(parts[0]).to.deep.equal({ type: 'text', text: 'what is this?' });
    expect(parts[1].type).to.equal('image_url');
    expect(parts[1].image_url.url).to.equal(`data:image/jpeg;base64,${Buffer.from(jpeg(30_000)).toString('base64')}`);
    expect(api.requests.filter((request) => request.method === 'file').map((request) => request.body.path)).to.deep.equal(['photos/large.jpg']);

    // A text file is read as text; one over the limit is named with why, and never fetched.
    const notes = api.addFile(new TextEncoder().encode('remember the milk'), 'documents/notes.txt');
    const big = api.addFile(new Uint8Array(100_000), 'documents/big.pdf');
    api.message(TOKEN, { chat, from: eve, caption: 'my notes', document: { ...notes, file_name: 'notes.txt', mime_type: 'text/plain' } });
    await replyFor(eve.id, 1, /Seen/);
    expect(flat(content())).to.equal('my notes\n[file notes.txt (text/plain, 17 bytes)]\nContent of notes.txt:\nremember the milk');
    api.message(TOKEN, { chat, from: eve, document: { ...big, file_name: 'big.pdf', mime_type: 'application/pdf' } });
    await replyFor(eve.id, 2, /Seen/);
    expect(flat(content())).to.equal("[file big.pdf (application/pdf, 98 KB): not kept: larger than this channel's limit of 64 KB]");
    expect(api.requests.filter((request) => request.method === 'getFile' && request.body.file_id === big.file_id)).to.have.length(0);

    // A model not listed in imageModels reads the photo by name; the earlier turns name their files.
    await set('models.providers.script.imageModels', []);
    const again = api.addFile(jpeg(1500), 'photos/again.jpg');
    api.message(TOKEN, { chat, from: eve, photo: [{ ...again, width: 50, height: 50 }] });
    await replyFor(eve.id, 3, /Seen/);
    expect(content()).to.equal('[image photo.jpg (image/jpeg, 1 KB): this model does not take images]');
    const history = upstream.requests.at(-1)!.body.messages.filter((message: any) => message.role === 'user').map((message: any) => flat(message.content));
    expect(history[0]).to.equal('what is this?\n[image photo.jpg (image/jpeg, 29 KB)]');

    const shown = await json(['sessions', 'show', `telegram:default:dm:${eve.id}`]);
    const files = shown.messages.filter((message: any) => message.direction === 'in').map((message: any) => message.data.attachments.map((file: any) => [file.name, file.kept]));
    expect(files).to.deep.equal([[['photo.jpg', true]], [['notes.txt', true]], [['big.pdf', false]], [['photo.jpg', true]]]);
    const text = await home.run(['sessions', 'show', `telegram:default:dm:${eve.id}`]);
    expect(text.stdout).to.include('    [file notes.txt (text/plain, 17 bytes)]').and.to.include("    [file big.pdf (application/pdf, 98 KB): not kept: larger than this channel's limit of 64 KB]");
  });

  it('with streaming on, one message grows as the answer is written and ends holding all of it; what does not fit follows as new messages', async () => {
    const gus = person();
    await set('channels.telegram.allowFrom', [String(gus.id)]);
    await set('channels.telegram.agent', 'helper');
    await set('channels.telegram.streaming', true);
    const answer = Array.from({ length: 12 }, (_, index) => `Sentence ${index + 1} of the answer.`).join(' ');
    upstream.enqueue(openaiText(answer, undefined, { pieces: 12, gapMs: 300 }));
    dm(gus, 'tell me');
    const edits = () => api.sent(gus.id, ['editMessageText']);
    await waitFor(() => (edits().some((request) => request.body.text === answer) ? true : undefined), 30_000, 'the whole answer in the message');
    const posted = api.sent(gus.id);
    expect(posted, 'one message, edited').to.have.length(1);
    const id = await waitFor(async () => (await json(['sessions', 'show', `telegram:default:dm:${gus.id}`])).messages.at(-1).delivery?.receipts[0], 10_000, 'the delivery');
    expect(edits().every((request) => String(request.body.message_id) === id)).to.equal(true);
    const shown = [String(posted[0]!.body.text), ...edits().map((request) => String(request.body.text))];
    expect(shown.length, 'it grew in steps').to.be.at.least(3);
    shown.forEach((text, index) => {
      expect(answer.startsWith(text), `step ${index} is the answer so far`).to.equal(true);
      if (index > 0) expect(text.length).to.be.at.least(shown[index - 1]!.length);
    });
    const times = [posted[0]!.at, ...edits().map((request) => request.at)];
    // The previews at most about once a second (the final text follows as soon as the run ends).
    for (let index = 2; index < times.length - 1; index++) expect(times[index]! - times[index - 1]!, 'edits at most about once a second').to.be.at.least(900);

    // Longer than one message: the stream stops when the first is full; the final text fills it, the rest follows.
    const long = `${'Word '.repeat(1000)}\n\n${'More '.repeat(200)}`.trim();
    upstream.enqueue(openaiText(long, undefined, { pieces: 10, gapMs: 200 }));
    dm(gus, 'and at length?');
    await waitFor(() => (api.sent(gus.id).length >= 3 ? true : undefined), 30_000, 'the rest of the long answer');
    await sleep(1500);
    const second = api.sent(gus.id).slice(1);
    expect(second, 'the streamed message and one more').to.have.length(2);
    const lastEdit = api.sent(gus.id, ['editMessageText']).at(-1)!;
    const receipts = await waitFor(async () => (await json(['sessions', 'show', `telegram:default:dm:${gus.id}`])).messages.at(-1).delivery?.receipts, 10_000, 'the delivery');
    expect(receipts, 'the streamed message, then the new one').to.have.length(2);
    expect(receipts[0]).to.equal(String(lastEdit.body.message_id));
    expect(`${String(lastEdit.body.text)}\n\n${String(second[1]!.body.text)}`.replace(/\s+/g, ' ')).to.equal(long.replace(/\s+/g, ' '));
  });

  it('in webhook mode, stores what Telegram posts with its secret token before answering 200, refuses anything else, and loses nothing while the daemon is down', async () => {
    const hal = person();
    await set('channels.telegram.allowFrom', [String(hal.id)]);
    await set('channels.telegram.agent', 'helper');
    upstream.responder = (request) => openaiText(`Answer: ${String(request.body.messages.at(-1).content)}`);
    const url = `http://127.0.0.1:${port}/channels/telegram/default/webhook`;
    await set('channels.telegram.webhookUrl', url);
    expect((await home.run(['restart'])).code).to.equal(0);
    // No secret yet: the account says how to set one.
    const waiting = await waitFor(async () => ((await account())?.state === 'error' ? account() : undefined), 20_000, 'the account to want a secret');
    expect(waiting.detail).to.include('gateway secrets set channels.telegram.webhookSecret');
    const secret = 'wh_secret-0123456789abcdef';
    expect((await home.run(['secrets', 'set', 'channels.telegram.webhookSecret'], { input: secret })).code).to.equal(0);
    expect((await home.run(['restart'])).code).to.equal(0);
    await connected();
    expect((await account()).detail).to.equal(`@${BOT} (webhook)`);
    expect(api.requests.filter((request) => request.method === 'setWebhook').at(-1)!.body).to.include({ url, secret_token: secret });

    dm(hal, 'via webhook');
    expect(await replyFor(hal.id, 0)).to.equal('Answer: via webhook');
    expect(api.webhookTries.at(-1)).to.include({ status: 200 });

    // Whoever else posts there is refused, and nothing they sent is stored.
    const forged = { update_id: 999_999_001, message: { message_id: 5, date: 1, chat: { id: hal.id, type: 'private' }, from: hal, text: 'forged' } };
    const post = (headers: Record<string, string>, body: string) => fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
    expect((await post({}, JSON.stringify(forged))).status).to.equal(401);
    expect((await post({ 'x-telegram-bot-api-secret-token': 'wrong' }, JSON.stringify(forged))).status).to.equal(401);
    expect((await post({ 'x-telegram-bot-api-secret-token': secret }, '{"update_id":')).status).to.equal(400);
    const deep = await post({ 'x-telegram-bot-api-secret-token': secret }, `{"update_id":1,"message":${'['.repeat(50_000)}${']'.repeat(50_000)}}`);
    expect(deep.status).to.equal(400);
    expect(((await deep.json()) as { message: string }).message).to.equal('The body nests deeper than 64 levels; the gateway takes at most 64.');
    expect((await fetch(`http://127.0.0.1:${port}/channels/telegram/nobody/webhook`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).status).to.equal(404);
    expect((await fetch(`http://127.0.0.1:${port}/channels/telegram/default/webhook`, { method: 'POST', body: '{}' })).status, 'a body not sent as JSON').to.equal(415);

    // The daemon is down: Telegram keeps posting until it answers 2xx, and the message is answered once.
    expect((await home.run(['stop'])).code).to.equal(0);
    dm(hal, 'while you were away');
    await waitFor(() => (api.webhookTries.some((entry) => entry.status === 0) ? true : undefined), 10_000, 'a failed post');
    expect((await home.run(['start'])).code).to.equal(0);
    expect(await replyFor(hal.id, 1)).to.equal('Answer: while you were away');
    await sleep(1000);
    expect(texts(hal.id)).to.deep.equal(['Answer: via webhook', 'Answer: while you were away']);
    const session = await json(['sessions', 'show', `telegram:default:dm:${hal.id}`]);
    expect(session.messages.filter((m: any) => m.direction === 'in').map((m: any) => m.text)).to.deep.equal(['via webhook', 'while you were away']);

    // Back to polling: the webhook is deleted, and updates come by getUpdates again.
    expect((await home.run(['config', 'unset', 'channels.telegram.webhookUrl'])).code).to.equal(0);
    expect((await home.run(['restart'])).code).to.equal(0);
    await connected();
    dm(hal, 'polled again');
    expect(await replyFor(hal.id, 2)).to.equal('Answer: polled again');
    expect(api.requests.some((request) => request.method === 'deleteWebhook')).to.equal(true);
  });

  it('gateway message send while Telegram is out of reach is queued, and delivered once when the account is back', async () => {
    const user = person();
    // A chat Telegram knows: the person wrote to the bot (and got a pairing code).
    dm(user, 'hello');
    await replyFor(user.id, 0);
    const before = texts(user.id).length;
    await api.stop();
    await waitFor(async () => ((await account())?.state !== 'connected' ? true : undefined), 20_000, 'the account to notice');
    const queued = await home.run(['message', 'send', '--channel', 'telegram', '--to', String(user.id), 'Said while Telegram was away', '--json']);
    expect(queued.code, queued.stderr).to.equal(0);
    expect(queued.json, JSON.stringify(queued.json)).to.include({ sent: false });
    expect(queued.json.delivery.status).to.equal('pending');
    expect(texts(user.id)).to.have.length(before);
    await api.start(api.port);
    await connected();
    await replyFor(user.id, before, /Said while Telegram was away/);
    await sleep(1500);
    expect(texts(user.id).slice(before), 'sent once').to.deep.equal(['Said while Telegram was away']);
    const sent = await home.run(['message', 'send', '--channel', 'telegram', '--to', String(user.id), 'And now at once', '--json']);
    expect(sent.json, JSON.stringify(sent.json)).to.include({ sent: true });
    expect(sent.json.delivery.receipts).to.have.length(1);
  });

  it('kill -9 with messages in flight: after a restart every message is answered exactly once, none lost', async () => {
    const dan = person();
    await set('channels.telegram.allowFrom', [String(dan.id)]);
    await set('channels.telegram.agent', 'helper');
    // The third question's model call waits until the kill.
    const answering = answerHoldingOnce('question 3');
    upstream.responder = answering.responder;
    const questions = Array.from({ length: 6 }, (_, index) => `question ${index + 1}`);
    for (const question of questions) dm(dan, question);
    await waitFor(async () => (answering.held() && texts(dan.id).length >= 2
      && (await json(['sessions', 'show', `telegram:default:dm:${dan.id}`])).messages.filter((m: any) => m.delivery?.status === 'sent').length >= 2 ? true : undefined),
    30_000, 'two answers sent, and the third run waiting on its model');
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

describe('Telegram out of reach (e2e): an account says where and why, not "fetch failed"', function () {
  this.timeout(90_000);
  let home: Home;
  afterEach(() => home?.cleanup());

  it('a closed loopback port and a name that does not resolve are told in channels status, doctor and the log', async () => {
    const closed = await freePort();
    home = new Home({ GATEWAY_PORT: String(await freePort()) });
    await home.set('channels.telegram', {
      enabled: true, apiRoot: `http://127.0.0.1:${closed}`, reconnectMaxDelayMs: 1000,
      accounts: { lost: { apiRoot: 'http://nothing.invalid:8081' } },
    });
    for (const name of ['channels.telegram.botToken', 'channels.telegram.accounts.lost.botToken']) {
      expect((await home.run(['secrets', 'set', name], { input: TOKEN })).code).to.equal(0);
    }
    const started = await home.run(['start']);
    expect(started.code, started.stderr).to.equal(0);
    const accounts = await waitFor(async () => {
      const listed = (await home.json(['channels', 'status'])).channels.filter((c: any) => c.channel === 'telegram');
      return listed.length === 2 && listed.every((c: any) => /^cannot reach Telegram: /.test(c.detail ?? '')) ? listed : undefined;
    }, 30_000, 'both accounts to say why they cannot reach Telegram');
    const detail = (name: string) => String(accounts.find((c: any) => c.account === name).detail);
    expect(detail('default')).to.equal(`cannot reach Telegram: connection refused at 127.0.0.1:${closed}`);
    // Offline resolvers answer "try again" (EAI_AGAIN) where others say the name does not exist (ENOTFOUND).
    expect(detail('lost')).to.match(/^cannot reach Telegram: DNS lookup failed for host nothing\.invalid \((ENOTFOUND|EAI_AGAIN)/);
    for (const account of accounts) {
      expect(account.state).to.equal('disconnected');
      expect(account.detail).to.not.include('fetch failed').and.not.include(TOKEN.split(':')[1]);
    }

    const doctor = await home.run(['doctor', '--json']);
    const channels = (doctor.json as { checks: { name: string; status: string; detail: string }[] }).checks.find((check) => check.name === 'channels')!;
    expect(channels.status).to.equal('warn');
    expect(channels.detail).to.include(`connection refused at 127.0.0.1:${closed}`).and.to.include('DNS lookup failed for host nothing.invalid');
    const log = (await home.run(['logs', '-n', '200', '--raw'])).stdout;
    expect(log).to.include(`cannot reach Telegram: connection refused at 127.0.0.1:${closed}`).and.not.include(TOKEN.split(':')[1]);
  });
});
