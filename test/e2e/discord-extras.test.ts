import { expect } from 'chai';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort, Home, waitFor } from '../support/cli.ts';
import { DiscordApi, nextId } from '../support/discord-api.ts';
import { openaiText, ScriptedUpstream } from '../support/scripted-upstream.ts';

/** Reactions and files out on Discord (the gateway's client against the stand-in of Discord). */
describe('Discord reactions and files out (e2e, stand-in of Discord)', function () {
  this.timeout(120_000);
  let discord: DiscordApi;
  let home: Home;
  let upstream: ScriptedUpstream;
  let room: string;

  const json = (args: string[]) => home.json(args);
  const set = (key: string, value: unknown) => home.set(key, value);

  beforeEach(async () => {
    discord = await new DiscordApi().start();
    room = discord.channel();
    upstream = await new ScriptedUpstream().start();
    upstream.responder = () => openaiText('Noted.');
    home = new Home({ GATEWAY_PORT: String(await freePort()) });
    await set('channels.discord', { enabled: true, apiRoot: discord.apiRoot, rooms: [room], reconnectMaxDelayMs: 2000, agent: 'helper', dmPolicy: 'open', allowFrom: ['*'] });
    await set('models.providers.script', { kind: 'openai-compatible', baseUrl: upstream.url, models: ['m'], retries: { max: 0 } });
    await set('agents.helper', { model: 'script/m' });
    expect((await home.run(['secrets', 'set', 'channels.discord.botToken'], { input: discord.token })).code).to.equal(0);
    expect((await home.run(['start'])).code).to.equal(0);
    await waitFor(async () => ((await json(['channels', 'status'])).channels.find((c: any) => c.channel === 'discord')?.state === 'connected' ? true : undefined), 20_000, 'the bot to connect');
  });
  afterEach(async () => {
    home.cleanup();
    await discord.stop();
    await upstream.stop();
  });

  it('puts 👀 on a DM once stored and reacts by message.react; sends a workspace file as an attachment with its bytes, and refuses one over Discord\'s 10 MiB', async () => {
    const ann = { id: nextId(), username: 'ann', global_name: 'Ann' };
    const dmChannel = discord.dmOf(ann);
    const message = discord.message({ author: ann, channel: dmChannel, content: 'hello' });
    await waitFor(() => (discord.sent(dmChannel).length ? true : undefined), 30_000, 'the answer');
    await waitFor(() => (discord.reactions.length ? true : undefined), 10_000, 'the acknowledgement');
    expect(discord.reactions).to.deep.equal([`${dmChannel} ${message.id} 👀`]);
    await json(['tools', 'invoke', 'message.react', '--args', JSON.stringify({ channel: 'discord', to: dmChannel, messageId: message.id, emoji: '✅' })]);
    expect(discord.reactions.at(-1)).to.equal(`${dmChannel} ${message.id} ✅`);

    const workspace = join(home.profileDir(), 'workspaces', 'helper');
    mkdirSync(workspace, { recursive: true });
    const data = Buffer.from(Array.from({ length: 100_000 }, (_, index) => (index * 7) % 256));
    writeFileSync(join(workspace, 'dump.bin'), data);
    const sent = await json(['message', 'send', '--channel', 'discord', '--to', dmChannel, '--file', 'dump.bin', 'the dump']);
    expect(sent.delivery).to.include({ kind: 'file', status: 'sent' });
    const upload = discord.uploads.at(-1)!;
    expect(upload).to.include({ channel: dmChannel, filename: 'dump.bin', content: 'the dump' });
    expect(Buffer.from(upload.data).equals(data)).to.equal(true);

    writeFileSync(join(workspace, 'big.bin'), Buffer.alloc(11 * 1024 * 1024, 1));
    const big = await home.run(['message', 'send', '--channel', 'discord', '--to', dmChannel, '--file', 'big.bin', '--json']);
    expect(big.code).to.not.equal(0);
    expect(big.json.error.message).to.equal('big.bin is too large to send on discord: it takes files up to 10.0 MB.');
    expect(discord.uploads).to.have.length(1);
  });

  it('keeps a thread of a channel it may answer in a session of its own, answered in the thread', async () => {
    const bob = { id: nextId(), username: 'bob', global_name: 'Bob' };
    const thread = discord.thread(room);
    discord.message({ author: bob, channel: room, content: `<@${discord.bot.id}> in the channel`, guild: true, mentionsBot: true });
    await waitFor(() => (discord.sent(room).length ? true : undefined), 30_000, 'the answer in the channel');
    const asked = discord.message({ author: bob, channel: thread, content: `<@${discord.bot.id}> in the thread`, guild: true, mentionsBot: true });
    await waitFor(() => (discord.sent(thread).length ? true : undefined), 30_000, 'the answer in the thread');
    expect(discord.sent(thread)[0]!.body.message_reference).to.include({ message_id: asked.id });
    const keys = (await json(['sessions', 'list'])).sessions.map((session: any) => session.key);
    expect(keys).to.include.members([`discord:default:group:${room}`, `discord:default:group:${room}#${thread}`]);
    const inThread = await json(['sessions', 'show', `discord:default:group:${room}#${thread}`]);
    expect(inThread.messages.map((message: any) => message.text).join('\n')).to.include('in the thread').and.not.include('in the channel');
    // A thread of a channel the agent may not answer in is not answered.
    const elsewhere = discord.thread(discord.channel());
    discord.message({ author: bob, channel: elsewhere, content: `<@${discord.bot.id}> hello`, guild: true, mentionsBot: true });
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(discord.sent(elsewhere)).to.deep.equal([]);
  });
});
