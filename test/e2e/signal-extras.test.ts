import { expect } from 'chai';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort, Home, waitFor } from '../support/cli.ts';
import { openaiText, ScriptedUpstream } from '../support/scripted-upstream.ts';
import { SignalCli } from '../support/signal-cli.ts';

const BOT = '+15550000001';

/** Reactions and files out on Signal (a stand-in of signal-cli's HTTP daemon). */
describe('Signal reactions and files out (e2e, stand-in of signal-cli daemon --http)', function () {
  this.timeout(180_000);
  let cli: SignalCli;
  let home: Home;
  let upstream: ScriptedUpstream;

  beforeEach(async () => {
    cli = await new SignalCli({ accounts: [BOT] }).start();
    upstream = await new ScriptedUpstream().start();
    upstream.responder = () => openaiText('Noted.');
    home = new Home({ GATEWAY_PORT: String(await freePort()) });
    await home.set('models.providers.script', { kind: 'openai-compatible', baseUrl: upstream.url, models: ['m'], retries: { max: 0 } });
    await home.set('agents.helper', { model: 'script/m' });
    await home.set('channels.signal', { enabled: true, account: BOT, rpcUrl: cli.url, agent: 'helper', reconnectMaxDelayMs: 2000, dmPolicy: 'open', allowFrom: ['*'] });
    expect((await home.run(['start'])).code).to.equal(0);
    await waitFor(async () => ((await home.json(['channels', 'status'])).channels.find((c: any) => c.channel === 'signal')?.state === 'connected' ? true : undefined), 30_000, 'the account to connect');
  });
  afterEach(async () => {
    home.cleanup();
    await cli.stop();
    await upstream.stop();
  });

  it('reacts 👀 to a stored message and by message.react; sends a workspace file as an attachment with its bytes', async () => {
    const ann = cli.person('Ann');
    const sent = cli.say(ann, 'hello');
    await waitFor(() => (cli.texts(ann).includes('Noted.') ? true : undefined), 30_000, 'the answer');
    await waitFor(() => (cli.reactions.length ? true : undefined), 10_000, 'the acknowledgement');
    expect(cli.reactions[0]).to.include({ to: ann.number, emoji: '👀', targetTimestamp: sent });
    expect([ann.uuid, ann.number]).to.include(cli.reactions[0]!.targetAuthor);
    const session = await home.json(['sessions', 'show', `signal:default:dm:${ann.number}`]);
    const message = session.messages.find((entry: any) => entry.direction === 'in');
    await home.json(['tools', 'invoke', 'message.react', '--args', JSON.stringify({ channel: 'signal', to: ann.number, messageId: String(message.id), emoji: '❤️' })]);
    expect(cli.reactions.at(-1)).to.include({ emoji: '❤️', targetTimestamp: sent });

    const workspace = join(home.profileDir(), 'workspaces', 'helper');
    mkdirSync(workspace, { recursive: true });
    const data = Buffer.from(Array.from({ length: 30_000 }, (_, index) => (index * 3) % 256));
    writeFileSync(join(workspace, 'photo.bin'), data);
    const out = await home.json(['message', 'send', '--channel', 'signal', '--to', ann.number!, '--file', 'photo.bin', 'for you']);
    expect(out.delivery).to.include({ kind: 'file', status: 'sent' });
    const file = cli.attachments.at(-1)!;
    expect(file).to.include({ to: ann.number, text: 'for you', name: 'photo.bin', contentType: 'application/octet-stream' });
    expect(file.data.equals(data)).to.equal(true);
  });
});
