import { expect } from 'chai';
import { mkdirSync, symlinkSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort, Home, sleep, waitFor } from '../support/cli.ts';
import { openaiText, openaiToolCalls, ScriptedUpstream } from '../support/scripted-upstream.ts';
import { TelegramApi, type TgUser } from '../support/telegram-api.ts';

const TOKEN = '7001234567:AAH-test-token-for-the-stand-in';
const BOT = 'gw_test_bot';
const FORUM = -1005550001;
/** The smallest PNG: a 1x1 pixel. */
const PNG = Buffer.from('89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082', 'hex');

/** Reactions, forum topics as sessions, and files out, on Telegram (grammY against the Bot API stand-in). */
describe('Telegram reactions, topics and files out (e2e, stand-in of the Bot API)', function () {
  this.timeout(120_000);
  let api: TelegramApi;
  let home: Home;
  let upstream: ScriptedUpstream;
  let serial = 0;

  const json = (args: string[]) => home.json(args);
  const set = (key: string, value: unknown) => home.set(key, value);
  const person = (): TgUser => ({ id: 6_000_000 + ++serial, first_name: `Bo${serial}`, username: `bo_${serial}` });
  const dm = (user: TgUser, text: string) => api.message(TOKEN, { chat: { id: user.id, type: 'private', first_name: user.first_name }, from: user, text });
  const texts = (chatId: number) => api.sent(chatId).map((request) => String(request.body.text));
  const reactions = (chatId: number) => api.requests.filter((request) => request.method === 'setMessageReaction' && Number(request.body.chat_id) === chatId)
    .map((request) => ({ messageId: Number(request.body.message_id), emoji: (typeof request.body.reaction === 'string' ? JSON.parse(request.body.reaction) : request.body.reaction)[0].emoji }));
  const workspace = () => join(home.profileDir(), 'workspaces', 'helper');
  let ann: TgUser;

  beforeEach(async () => {
    api = await new TelegramApi().start();
    api.addBot(TOKEN, BOT);
    upstream = await new ScriptedUpstream().start();
    upstream.responder = (request) => openaiText(`Answer: ${String(request.body.messages.at(-1).content)}`);
    home = new Home({ GATEWAY_PORT: String(await freePort()) });
    ann = person();
    await set('channels.telegram', { enabled: true, apiRoot: api.apiRoot, rooms: [String(FORUM)], reconnectMaxDelayMs: 2000, agent: 'helper', allowFrom: [String(ann.id)] });
    await set('models.providers.script', { kind: 'openai-compatible', baseUrl: upstream.url, models: ['m'], retries: { max: 0 } });
    await set('agents.helper', { model: 'script/m', tools: ['message.attach'] });
    expect((await home.run(['secrets', 'set', 'channels.telegram.botToken'], { input: TOKEN })).code).to.equal(0);
    const started = await home.run(['start']);
    expect(started.code, started.stderr).to.equal(0);
    await waitFor(async () => ((await json(['channels', 'status'])).channels.find((c: any) => c.channel === 'telegram')?.state === 'connected' ? true : undefined), 20_000, 'the bot to connect');
    mkdirSync(workspace(), { recursive: true });
  });
  afterEach(async () => {
    home.cleanup();
    await api.stop();
    await upstream.stop();
  });

  it('puts 👀 on a message once it is stored, reacts with message.react by the session\'s id or Telegram\'s, and puts none with ackReaction ""', async () => {
    const update = dm(ann, 'hello there');
    expect(await waitFor(() => texts(ann.id).find((text) => text.startsWith('Answer')), 30_000, 'the answer')).to.equal('Answer: hello there');
    await waitFor(() => (reactions(ann.id).length ? true : undefined), 10_000, 'the acknowledgement');
    expect(reactions(ann.id)).to.deep.equal([{ messageId: update.message!.message_id, emoji: '👀' }]);

    const shown = await json(['sessions', 'show', `telegram:default:dm:${ann.id}`]);
    const inbound = shown.messages.find((message: any) => message.direction === 'in');
    const reacted = await json(['tools', 'invoke', 'message.react', '--args', JSON.stringify({ channel: 'telegram', to: String(ann.id), messageId: String(inbound.id), emoji: '👍' })]);
    expect(reacted.result).to.include({ reacted: true });
    expect(reactions(ann.id).at(-1)).to.deep.equal({ messageId: update.message!.message_id, emoji: '👍' });
    // Telegram's own id (the update's) names it too.
    await json(['tools', 'invoke', 'message.react', '--args', JSON.stringify({ channel: 'telegram', to: String(ann.id), messageId: String(update.update_id), emoji: '🔥' })]);
    expect(reactions(ann.id).at(-1)).to.deep.equal({ messageId: update.message!.message_id, emoji: '🔥' });

    const unknown = await home.run(['tools', 'invoke', 'message.react', '--args', JSON.stringify({ channel: 'telegram', to: String(ann.id), messageId: '999999', emoji: '👍' }), '--json']);
    expect(unknown.code).to.not.equal(0);
    expect(unknown.json.error.message).to.match(/No message 999999 .* to react to/);
    const emoji = await home.run(['tools', 'invoke', 'message.react', '--args', JSON.stringify({ channel: 'telegram', to: String(ann.id), messageId: String(inbound.id), emoji: 'two words' }), '--json']);
    expect(emoji.code).to.not.equal(0);
    expect(emoji.json.error.message).to.match(/one emoji/);
    // An emoji Telegram refuses is given up at once, with Telegram's reason.
    const refused = await home.run(['tools', 'invoke', 'message.react', '--args', JSON.stringify({ channel: 'telegram', to: String(ann.id), messageId: String(inbound.id), emoji: '🦄' }), '--json']);
    expect(refused.json.error.message).to.include('REACTION_INVALID');

    await set('channels.telegram.ackReaction', '');
    const before = reactions(ann.id).length;
    dm(ann, 'again');
    await waitFor(() => texts(ann.id).find((text) => text === 'Answer: again'), 30_000, 'the second answer');
    await sleep(500);
    expect(reactions(ann.id), 'no acknowledgement with ackReaction ""').to.have.length(before);
  });

  it('keeps a forum topic a session of its own, answered in the topic, apart from the group\'s general chat', async () => {
    const forum = { id: FORUM, type: 'supergroup' as const, title: 'Forum', is_forum: true };
    const mention = (text: string) => ({ text: `@${BOT} ${text}`, entities: [{ type: 'mention', offset: 0, length: BOT.length + 1 }] });
    api.message(TOKEN, { chat: forum, from: ann, ...mention('in topic 42'), message_thread_id: 42, is_topic_message: true });
    await waitFor(() => texts(FORUM).find((text) => text.includes('in topic 42')), 30_000, 'the answer in the topic');
    api.message(TOKEN, { chat: forum, from: ann, ...mention('in the general chat') });
    await waitFor(() => texts(FORUM).find((text) => text.includes('general chat')), 30_000, 'the answer in the general chat');

    const sent = api.sent(FORUM);
    expect(sent.find((request) => String(request.body.text).includes('topic 42'))!.body.message_thread_id).to.equal(42);
    expect(sent.find((request) => String(request.body.text).includes('general chat'))!.body.message_thread_id).to.equal(undefined);
    const sessions = (await json(['sessions', 'list'])).sessions.map((session: any) => session.key);
    expect(sessions).to.include.members([`telegram:default:group:${FORUM}#42`, `telegram:default:group:${FORUM}`]);
    const topic = await json(['sessions', 'show', `telegram:default:group:${FORUM}#42`]);
    expect(topic.messages.map((message: any) => message.text).join('\n')).to.include('in topic 42').and.not.include('general chat');

    // A file sent into the topic lands there.
    writeFileSync(join(workspace(), 'minutes.txt'), 'the minutes\n');
    await json(['message', 'send', '--channel', 'telegram', '--to', `${FORUM}/42`, '--file', 'minutes.txt']);
    expect(api.uploads.at(-1)).to.include({ method: 'sendDocument', chatId: FORUM, threadId: 42, name: 'minutes.txt' });
  });

  it('sends a workspace file (a document, an image as a photo) through the outbox with its bytes; refuses one outside the workspace, a link out, one too large', async () => {
    const report = Buffer.from('%PDF-1.4\nthe weekly report\n');
    writeFileSync(join(workspace(), 'report.pdf'), report);
    writeFileSync(join(workspace(), 'chart.png'), PNG);
    dm(ann, 'hi');
    await waitFor(() => texts(ann.id).find((text) => text === 'Answer: hi'), 30_000, 'the first answer');
    const sent = await json(['message', 'send', '--channel', 'telegram', '--to', String(ann.id), '--file', 'report.pdf', 'This week']);
    expect(sent).to.include({ sent: true });
    expect(sent.delivery).to.include({ kind: 'file', status: 'sent' });
    const document = api.uploads.find((upload) => upload.method === 'sendDocument')!;
    expect(document).to.include({ chatId: ann.id, name: 'report.pdf', caption: 'This week' });
    expect(Buffer.from(document.data).equals(report)).to.equal(true);
    await json(['message', 'send', '--channel', 'telegram', '--to', String(ann.id), '--file', 'chart.png']);
    const photo = api.uploads.find((upload) => upload.method === 'sendPhoto')!;
    expect(Buffer.from(photo.data).equals(PNG)).to.equal(true);

    const outside = await home.run(['message', 'send', '--channel', 'telegram', '--to', String(ann.id), '--file', '../../secrets.json', '--json']);
    expect(outside.code).to.not.equal(0);
    expect(outside.json.error.message).to.include('outside the workspace');
    symlinkSync(home.file('secrets.json'), join(workspace(), 'notes.txt'));
    const linked = await home.run(['message', 'send', '--channel', 'telegram', '--to', String(ann.id), '--file', 'notes.txt', '--json']);
    expect(linked.code).to.not.equal(0);
    expect(linked.json.error.message).to.include('outside the workspace');
    const absolute = await home.run(['message', 'send', '--channel', 'telegram', '--to', String(ann.id), '--file', home.file('secrets.json'), '--json']);
    expect(absolute.json.error.message).to.include('outside the workspace');
    writeFileSync(join(workspace(), 'huge.bin'), '');
    truncateSync(join(workspace(), 'huge.bin'), 30 * 1024 * 1024);
    const huge = await home.run(['message', 'send', '--channel', 'telegram', '--to', String(ann.id), '--file', 'huge.bin', '--json']);
    expect(huge.code).to.not.equal(0);
    expect(huge.json.error.message).to.match(/huge\.bin is too large to send on telegram: it takes files up to 25\.0 MB/);
    expect(api.uploads, 'nothing refused reached Telegram').to.have.length(2);
    expect(JSON.stringify(api.uploads.map((upload) => Buffer.from(upload.data).toString('latin1')))).to.not.include('gateway.token');
  });

  it('an agent attaches a workspace file to its reply; a file sent while Telegram is down goes once it is back, as it was when sent', async () => {
    writeFileSync(join(workspace(), 'chart.png'), PNG);
    upstream.enqueue(openaiToolCalls([{ name: 'message.attach', args: { path: 'chart.png', caption: 'the chart' } }]), openaiText('Here is the chart.'));
    dm(ann, 'send me the chart');
    await waitFor(() => texts(ann.id).find((text) => text === 'Here is the chart.'), 30_000, 'the reply');
    const attached = api.uploads.find((upload) => upload.chatId === ann.id)!;
    expect(attached).to.include({ method: 'sendPhoto', caption: 'the chart' });
    expect(Buffer.from(attached.data).equals(PNG)).to.equal(true);

    const port = api.port;
    await api.stop();
    writeFileSync(join(workspace(), 'late.txt'), 'written before the send\n');
    const queued = await json(['message', 'send', '--channel', 'telegram', '--to', String(ann.id), '--file', 'late.txt', 'kept']);
    expect(queued.sent).to.equal(false);
    // What goes is what was there when it was sent: the outbox holds its own copy.
    writeFileSync(join(workspace(), 'late.txt'), 'changed afterwards\n');
    await api.start(port);
    const late = await waitFor(() => api.uploads.find((upload) => upload.name === 'late.txt'), 60_000, 'the file once Telegram is back');
    expect(Buffer.from(late.data).toString()).to.equal('written before the send\n');
  });
});
