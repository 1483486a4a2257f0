import { expect } from 'chai';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort, Home, waitFor } from '../support/cli.ts';
import { codeIn } from '../support/irc.ts';
import { MailPerson, MailServers } from '../support/mail.ts';
import { openaiText, ScriptedUpstream } from '../support/scripted-upstream.ts';

/** Files out by mail, through the real postfix and dovecot. */
describe('email files out against a real postfix and dovecot (e2e)', function () {
  this.timeout(120_000);
  let servers: MailServers;
  let upstream: ScriptedUpstream;
  let home: Home;
  let bot: MailPerson;

  before(async () => {
    servers = await MailServers.start();
    bot = new MailPerson(servers, 'gwfiles', 'bot-password');
    upstream = await new ScriptedUpstream().start();
    upstream.responder = () => openaiText('Noted.');
  });
  after(async () => {
    await servers?.stop();
    await upstream?.stop();
  });
  beforeEach(async () => {
    home = new Home({ GATEWAY_PORT: String(await freePort()), NODE_EXTRA_CA_CERTS: servers.certificate });
    await home.set('models.providers.script', { kind: 'openai-compatible', baseUrl: upstream.url, models: ['m'], retries: { max: 0 } });
    await home.set('agents.helper', { model: 'script/m' });
    await home.set('channels.email', {
      enabled: true, address: bot.address, imap: `imap://127.0.0.1:${servers.imapPort}`, smtp: `smtp://127.0.0.1:${servers.smtpPort}`, agent: 'helper', reconnectMaxDelayMs: 2000,
    });
    expect((await home.run(['secrets', 'set', 'channels.email.password'], { input: 'bot-password' })).code).to.equal(0);
    expect((await home.run(['start'])).code).to.equal(0);
  });
  afterEach(() => home.cleanup());

  it('mails a workspace file as an attachment with its bytes, the text as the body; one too large for mail is refused', async () => {
    const carol = new MailPerson(servers, 'carolfiles');
    await carol.send({ to: bot.address, subject: 'Hi', text: 'hello' });
    const code = codeIn((await carol.waitFor(/pairing code is/)).text);
    expect((await home.run(['pair', 'approve', 'email', code])).code).to.equal(0);

    const workspace = join(home.profileDir(), 'workspaces', 'helper');
    mkdirSync(workspace, { recursive: true });
    const data = Buffer.from(Array.from({ length: 50_000 }, (_, index) => (index * 13) % 256));
    writeFileSync(join(workspace, 'archive.bin'), data);
    const seen = (await carol.inbox()).length;
    const sent = await home.json(['message', 'send', '--channel', 'email', '--to', carol.address, '--file', 'archive.bin', 'The archive you asked for.']);
    expect(sent.delivery).to.include({ kind: 'file', status: 'sent' });
    const mail = await carol.waitFor(/^The archive you asked for\.$/, { after: seen });
    expect(mail.attachments.map((file) => file.filename)).to.deep.equal(['archive.bin']);
    expect(mail.attachments[0]!.data.equals(data)).to.equal(true);

    writeFileSync(join(workspace, 'big.bin'), Buffer.alloc(21 * 1024 * 1024));
    const big = await home.run(['message', 'send', '--channel', 'email', '--to', carol.address, '--file', 'big.bin', '--json']);
    expect(big.code).to.not.equal(0);
    expect(big.json.error.message).to.equal('big.bin is too large to send on email: it takes files up to 20.0 MB.');
    await waitFor(async () => ((await carol.inbox()).length === seen + 1 ? true : undefined), 5000, 'nothing more');
  });
});
