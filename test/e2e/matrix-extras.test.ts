import { expect } from 'chai';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort, Home, waitFor } from '../support/cli.ts';
import { Homeserver, MatrixPerson } from '../support/matrix-homeserver.ts';
import { openaiText, ScriptedUpstream } from '../support/scripted-upstream.ts';

/** The smallest PNG: a 1x1 pixel. */
const PNG = Buffer.from('89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082', 'hex');

/** Reactions, threads as sessions, and files out on Matrix (the stand-in homeserver of the client-server API). */
describe('Matrix reactions, threads and files out (e2e, stand-in homeserver)', function () {
  this.timeout(120_000);
  let hs: Homeserver;
  let home: Home;
  let upstream: ScriptedUpstream;
  let bot: { userId: string; token: string };
  let alice: MatrixPerson;
  let room: string;

  const json = (args: string[]) => home.json(args);
  const set = (key: string, value: unknown) => home.set(key, value);
  const fromBot = (type: string) => hs.events(room).filter((event) => event.sender === bot.userId && event.type === type);

  beforeEach(async () => {
    hs = await new Homeserver().start();
    bot = hs.register('gwbot', 'Gateway Bot');
    upstream = await new ScriptedUpstream().start();
    upstream.responder = (request) => openaiText(`Echo: ${String((request.body.messages as { content: string }[]).at(-1)?.content)}`);
    home = new Home({ GATEWAY_PORT: String(await freePort()) });
    alice = new MatrixPerson(hs, 'alice');
    await set('models.providers.script', { kind: 'openai-compatible', baseUrl: upstream.url, models: ['m'], retries: { max: 0 } });
    await set('agents.helper', { model: 'script/m' });
    await set('channels.matrix', { enabled: true, homeserver: hs.url, agent: 'helper', allowFrom: [alice.userId], reconnectMaxDelayMs: 2000 });
    expect((await home.run(['secrets', 'set', 'channels.matrix.accessToken'], { input: bot.token })).code).to.equal(0);
    expect((await home.run(['start'])).code).to.equal(0);
    await waitFor(async () => ((await json(['channels', 'status'])).channels.find((c: any) => c.channel === 'matrix')?.state === 'connected' ? true : undefined), 20_000, 'the account to sync');
    room = await alice.directChat(bot.userId);
    await waitFor(() => (hs.membership(room, bot.userId) === 'join' ? true : undefined), 20_000, 'the bot to join');
  });
  afterEach(async () => {
    await alice.quit();
    home.cleanup();
    await hs.stop();
    await upstream.stop();
  });

  it('annotates a message with 👀 once stored, reacts by message.react, and answers a thread in the thread, as a session of its own', async () => {
    const first = await alice.say(room, 'hello');
    await alice.waitFor(room, /Echo: hello/);
    await waitFor(() => (fromBot('m.reaction').length ? true : undefined), 10_000, 'the acknowledgement');
    expect(fromBot('m.reaction').map((event) => event.content['m.relates_to'])).to.deep.equal([{ rel_type: 'm.annotation', event_id: first, key: '👀' }]);
    await json(['tools', 'invoke', 'message.react', '--args', JSON.stringify({ channel: 'matrix', to: alice.userId, messageId: first, emoji: '🎉' })]);
    expect(fromBot('m.reaction').at(-1)!.content['m.relates_to']).to.deep.equal({ rel_type: 'm.annotation', event_id: first, key: '🎉' });

    await alice.say(room, 'in the thread', { 'm.relates_to': { rel_type: 'm.thread', event_id: first, is_falling_back: true, 'm.in_reply_to': { event_id: first } } });
    const answer = await alice.waitFor(room, /Echo: in the thread/);
    expect(answer.content['m.relates_to']).to.include({ rel_type: 'm.thread', event_id: first });
    const keys = (await json(['sessions', 'list'])).sessions.map((session: any) => session.key);
    expect(keys).to.include.members([`matrix:default:dm:${alice.userId}`, `matrix:default:dm:${alice.userId}#${first}`]);
    const thread = await json(['sessions', 'show', `matrix:default:dm:${alice.userId}#${first}`]);
    expect(thread.messages.map((message: any) => message.text).join('\n')).to.include('in the thread').and.not.include('hello');
  });

  it('uploads a workspace file to the media store and shows it as m.image or m.file with its bytes', async () => {
    const workspace = join(home.profileDir(), 'workspaces', 'helper');
    mkdirSync(workspace, { recursive: true });
    writeFileSync(join(workspace, 'pixel.png'), PNG);
    writeFileSync(join(workspace, 'notes.txt'), 'the notes\n');
    await alice.say(room, 'hi');
    await alice.waitFor(room, /Echo: hi/);
    const image = await json(['message', 'send', '--channel', 'matrix', '--to', alice.userId, '--file', 'pixel.png', 'a pixel']);
    expect(image.delivery).to.include({ kind: 'file', status: 'sent' });
    await json(['message', 'send', '--channel', 'matrix', '--to', alice.userId, '--file', 'notes.txt']);
    const [pixel, notes] = fromBot('m.room.message').filter((event) => event.content.url);
    expect(pixel!.content).to.include({ msgtype: 'm.image', body: 'a pixel', filename: 'pixel.png' });
    expect(pixel!.content.info).to.deep.equal({ mimetype: 'image/png', size: PNG.length });
    expect(hs.mediaOf(pixel!.content.url)!.bytes.equals(PNG)).to.equal(true);
    expect(notes!.content).to.include({ msgtype: 'm.file', body: 'notes.txt', filename: 'notes.txt' });
    expect(hs.mediaOf(notes!.content.url)!.bytes.toString()).to.equal('the notes\n');
  });
});
