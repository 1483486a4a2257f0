import { expect } from 'chai';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort, Home, waitFor } from '../support/cli.ts';
import { openaiText, ScriptedUpstream } from '../support/scripted-upstream.ts';
import { SlackApi } from '../support/slack-api.ts';

const ROOM = 'C0GENERAL1';

/** Reactions, threads as sessions, and files out on Slack (the official SDK against the stand-in). */
describe('Slack reactions, threads and files out (e2e, stand-in of Slack)', function () {
  this.timeout(120_000);
  let slack: SlackApi;
  let home: Home;
  let upstream: ScriptedUpstream;

  const json = (args: string[]) => home.json(args);
  const set = (key: string, value: unknown) => home.set(key, value);
  const texts = (channel: string) => slack.posted(channel).map((call) => String(call.body.text));
  const tsOf = (envelope: unknown) => String((envelope as any).payload.event.ts);

  beforeEach(async () => {
    slack = await new SlackApi().start();
    upstream = await new ScriptedUpstream().start();
    upstream.responder = (request) => openaiText(`Answer: ${String(request.body.messages.at(-1).content)}`);
    home = new Home({ GATEWAY_PORT: String(await freePort()) });
    await set('channels.slack', { enabled: true, apiRoot: slack.apiRoot, rooms: [ROOM], reconnectMaxDelayMs: 2000, agent: 'helper', allowFrom: ['U0ANN'] });
    await set('models.providers.script', { kind: 'openai-compatible', baseUrl: upstream.url, models: ['m'], retries: { max: 0 } });
    await set('agents.helper', { model: 'script/m' });
    for (const [name, value] of [['botToken', slack.botToken], ['appToken', slack.appToken]]) {
      expect((await home.run(['secrets', 'set', `channels.slack.${name}`], { input: value })).code).to.equal(0);
    }
    expect((await home.run(['start'])).code).to.equal(0);
    await waitFor(async () => ((await json(['channels', 'status'])).channels.find((c: any) => c.channel === 'slack')?.state === 'connected' ? true : undefined), 20_000, 'the app to connect');
    slack.user('U0ANN', 'Ann');
  });
  afterEach(async () => {
    home.cleanup();
    await slack.stop();
    await upstream.stop();
  });

  it('puts :eyes: on a message once stored, reacts by message.react, and keeps a thread a session of its own, answered in the thread', async () => {
    const opening = slack.message({ user: 'U0ANN', channel: ROOM, text: `<@${slack.botUserId}> first question` });
    await waitFor(() => texts(ROOM).find((text) => text.includes('first question')), 30_000, 'the answer');
    await waitFor(() => (slack.reactions.length ? true : undefined), 10_000, 'the acknowledgement');
    expect(slack.reactions).to.deep.equal([`${ROOM} ${tsOf(opening)} eyes`]);

    const thread = tsOf(opening);
    const followUp = slack.message({ user: 'U0ANN', channel: ROOM, text: `<@${slack.botUserId}> in the thread`, thread_ts: thread });
    await waitFor(() => texts(ROOM).find((text) => text.includes('in the thread')), 30_000, 'the answer in the thread');
    expect(slack.posted(ROOM).find((call) => String(call.body.text).includes('in the thread'))!.body.thread_ts).to.equal(thread);
    const keys = (await json(['sessions', 'list'])).sessions.map((session: any) => session.key);
    expect(keys).to.include.members([`slack:default:group:${ROOM}`, `slack:default:group:${ROOM}#${thread}`]);
    const inThread = await json(['sessions', 'show', `slack:default:group:${ROOM}#${thread}`]);
    expect(inThread.messages.map((message: any) => message.text).join('\n')).to.include('in the thread').and.not.include('first question');

    const reacted = await json(['tools', 'invoke', 'message.react', '--args', JSON.stringify({ channel: 'slack', to: ROOM, messageId: tsOf(followUp), emoji: '👍' })]);
    expect(reacted.result).to.include({ reacted: true });
    expect(slack.reactions.at(-1)).to.equal(`${ROOM} ${tsOf(followUp)} +1`);
  });

  it('sends a workspace file through the upload flow with its bytes, in a thread when told', async () => {
    const workspace = join(home.profileDir(), 'workspaces', 'helper');
    mkdirSync(workspace, { recursive: true });
    const data = Buffer.from(Array.from({ length: 70_000 }, (_, index) => index % 251));
    writeFileSync(join(workspace, 'data.bin'), data);
    const sent = await json(['message', 'send', '--channel', 'slack', '--to', `${ROOM}/1700000000.000100`, '--file', 'data.bin', 'the *numbers*']);
    expect(sent.delivery).to.include({ kind: 'file', status: 'sent' });
    const upload = [...slack.uploads.values()].find((entry) => entry.name === 'data.bin')!;
    expect(upload).to.include({ channel: ROOM, thread: '1700000000.000100', comment: 'the _numbers_' });
    expect(Buffer.from(upload.data!).equals(data)).to.equal(true);
    expect(sent.delivery.receipts).to.deep.equal([[...slack.uploads.keys()].find((id) => slack.uploads.get(id) === upload)]);
  });
});
