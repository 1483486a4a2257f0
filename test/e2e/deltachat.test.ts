import { expect } from 'chai';
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort, Home, sleep, waitFor } from '../support/cli.ts';
import { DeltaChatPerson } from '../support/deltachat.ts';
import { codeIn } from '../support/irc.ts';
import { MailPerson, MailServers } from '../support/mail.ts';
import { openaiText, openaiToolCalls, ScriptedUpstream } from '../support/scripted-upstream.ts';

/** The gateway's Delta Chat account against the real postfix and dovecot; each person a Delta Chat engine of their own. */
describe('Delta Chat channel against a real postfix and dovecot, people on Delta Chat engines of their own (e2e)', function () {
  this.timeout(240_000);
  let servers: MailServers;
  let upstream: ScriptedUpstream;
  let home: Home;
  let bot: string;
  let serial = 0;
  const people: DeltaChatPerson[] = [];

  const set = (key: string, value: unknown) => home.set(key, value);
  const json = (args: string[]) => home.json(args);
  const state = async () => (await json(['channels', 'status'])).channels.find((c: any) => c.channel === 'deltachat') as { state: string; detail?: string };
  const connected = () => waitFor(async () => {
    const now = await state();
    return now?.state === 'connected' ? now : undefined;
  }, 60_000, 'the Delta Chat account to connect');
  const invite = async () => /https:\/\/i\.delta\.chat\/#\S+/.exec((await connected()).detail ?? '')![0];
  const inbound = async (key: string) => (await json(['sessions', 'show', key])).messages.filter((m: any) => m.direction === 'in').map((m: any) => m.text);
  /** A person on Delta Chat who joined the bot through its invite link. */
  const person = async (name: string) => {
    const someone = await DeltaChatPerson.start(servers, `${name}${++serial}`);
    people.push(someone);
    await someone.join(await invite());
    return someone;
  };
  /** A person the operator approved, through the pairing code the bot sent them. */
  const approved = async (name: string) => {
    const someone = await person(name);
    await someone.say('hello');
    const code = codeIn(await someone.waitFor(/pairing code is/));
    expect((await home.run(['pair', 'approve', 'deltachat', code])).code).to.equal(0);
    return someone;
  };

  before(async () => {
    servers = await MailServers.start();
    bot = servers.addUser('gwbot', 'bot-password');
    upstream = await new ScriptedUpstream().start();
  });
  after(async () => {
    await servers?.stop();
    await upstream?.stop();
  });
  beforeEach(async () => {
    upstream.requests.splice(0);
    upstream.responder = (request) => openaiText(`Answer: ${String(request.body.messages.at(-1).content)}`);
    home = new Home({ GATEWAY_PORT: String(await freePort()) });
    await set('models.providers.script', { kind: 'openai-compatible', baseUrl: upstream.url, models: ['m'], retries: { max: 0 } });
    await set('agents.helper', { model: 'script/m' });
    await set('channels.deltachat', {
      enabled: true, address: bot, imap: `imap://127.0.0.1:${servers.imapPort}`, smtp: `smtp://127.0.0.1:${servers.smtpPort}`, acceptInvalidCertificates: true,
      displayName: 'gw', agent: 'helper', reconnectMaxDelayMs: 2000,
    });
    const secret = await home.run(['secrets', 'set', 'channels.deltachat.password'], { input: 'bot-password' });
    expect(secret.code, secret.stderr).to.equal(0);
    const started = await home.run(['start']);
    expect(started.code, started.stderr).to.equal(0);
  });
  afterEach(async () => {
    home.cleanup();
    await Promise.all(people.splice(0).map((someone) => someone.stop()));
  });

  it('a stranger who joins through the invite link gets a code and nothing else; approved, the agent answers, end-to-end encrypted; the engine\'s folder is the profile user\'s alone', async () => {
    const status = await connected();
    expect(status.detail).to.include(bot).and.to.match(/invite link https:\/\/i\.delta\.chat\/#/);
    expect(status.detail).to.not.include('bot-password');
    expect(statSync(home.file('channels/deltachat/default')).mode & 0o777).to.equal(0o700);
    expect(statSync(home.file('channels/deltachat')).mode & 0o777).to.equal(0o700);

    const ann = await person('ann');
    await ann.say('hello?');
    const codeText = await ann.waitFor(/pairing code is/);
    const code = codeIn(codeText);
    expect(codeText).to.include(`gateway pair approve deltachat ${code}`);
    await sleep(1500);
    expect(await ann.texts(), 'the code and nothing else').to.have.length(1);
    expect(upstream.requests, 'no model call for a stranger').to.have.length(0);
    const pending = await json(['pair', 'list', 'deltachat']);
    expect(pending.requests[0]).to.include({ channel: 'deltachat', account: 'default', code, sender: ann.address });

    const approval = await json(['pair', 'approve', 'deltachat', code, '--notify']);
    expect(approval).to.include({ approved: true, notified: true });
    await ann.waitFor(/approved/, { after: 1 });
    await ann.say('Once upon a time');
    expect(await ann.waitFor(/^Answer/, { after: 2 })).to.equal('Answer: Once upon a time');
    const shown = await json(['sessions', 'show', `deltachat:default:dm:${ann.address}`]);
    expect(shown.messages.at(-1)).to.include({ role: 'assistant', text: 'Answer: Once upon a time' });
    expect(shown.messages.at(-1).delivery).to.include({ status: 'sent', to: ann.address });

    // A file comes to the agent; an operator's message goes out through the outbox.
    upstream.responder = (request) => openaiText(JSON.stringify(request.body.messages.at(-1).content).includes('plum') ? 'The word is plum.' : 'No word.');
    await ann.say('what does it say?', { file: { name: 'note.txt', content: 'the secret word is plum' } });
    expect(await ann.waitFor(/word/, { after: 3 })).to.equal('The word is plum.');
    const sent = await home.run(['message', 'send', '--channel', 'deltachat', '--to', ann.address.toUpperCase(), 'from the operator']);
    expect(sent.code, sent.stderr).to.equal(0);
    await ann.waitFor(/from the operator/, { after: 4 });
  });

  it('sends a workspace file with its caption, and one an agent attaches to its reply, end-to-end encrypted: the person gets the exact bytes; nothing from outside the workspace', async () => {
    await set('agents.helper.tools', ['message.attach']);
    const fay = await approved('fay');
    const workspace = join(home.profileDir(), 'workspaces', 'helper');
    mkdirSync(workspace, { recursive: true });
    const report = Buffer.from('%PDF-1.4\nthe weekly report\n');
    writeFileSync(join(workspace, 'report.pdf'), report);
    const sent = await json(['message', 'send', '--channel', 'deltachat', '--to', fay.address, '--file', 'report.pdf', 'This week']);
    expect(sent.delivery).to.include({ kind: 'file', status: 'sent' });
    const fileCame = (name: string) => waitFor(async () => (await fay.received()).find((message) => message.fileName === name), 60_000, `${name} at the person`);
    const document = await fileCame('report.pdf');
    expect(document).to.include({ text: 'This week', viewType: 'File', showPadlock: true });
    expect(readFileSync(document.file!).equals(report)).to.equal(true);

    // A PNG the engine can read (2x2 red pixels): it sends it as an image.
    const png = Buffer.from('89504e470d0a1a0a0000000d494844520000000200000002080600000072b60d240000001149444154789c63f8cfc0f01f8419600c0047ca07f967596eb70000000049454e44ae426082', 'hex');
    writeFileSync(join(workspace, 'chart.png'), png);
    upstream.enqueue(openaiToolCalls([{ name: 'message.attach', args: { path: 'chart.png', caption: 'the chart' } }]), openaiText('Here is the chart.'));
    await fay.say('send me the chart');
    await fay.waitFor(/^Here is the chart\.$/);
    // Delta Chat names an image by its date (image_<date>.png), as its apps do.
    const chart = await waitFor(async () => (await fay.received()).find((message) => message.text === 'the chart'), 60_000, 'the chart at the person');
    expect(chart).to.include({ viewType: 'Image', fileMime: 'image/png', showPadlock: true });
    expect(readFileSync(chart.file!).equals(png)).to.equal(true);
    expect(readdirSync(home.file('channels/deltachat/default/outgoing')), 'the copies written for the engine are gone once it took them').to.deep.equal([]);

    const outside = await home.run(['message', 'send', '--channel', 'deltachat', '--to', fay.address, '--file', '../../secrets.json', '--json']);
    expect(outside.code).to.not.equal(0);
    expect(outside.json.error.message).to.include('outside the workspace');
  });

  it('in a group, answers only when addressed by name or quoted, and only in the groups it may answer in', async () => {
    const bo = await approved('bo');
    const group = await bo.group('Ops', [await bo.botContact()]);
    await bo.say('gw: are you there?', { chat: group });
    await sleep(4000);
    expect(await bo.texts(group), 'a group channels.deltachat.rooms does not list').to.deep.equal([]);

    await set('channels.deltachat.rooms', ['*']);
    await bo.say('just chatting among ourselves', { chat: group });
    await bo.say('gw: what is up?', { chat: group });
    expect(await bo.waitFor(/^Answer/, { chat: group })).to.match(/^Answer: bo\d+: what is up\?$/);
    const answer = (await bo.received(group)).at(-1)!;
    await bo.say('and then?', { chat: group, quote: answer.id });
    expect(await bo.waitFor(/and then/, { chat: group, after: 1 })).to.match(/^Answer: bo\d+: and then\?$/);
    const key = (await json(['sessions', 'list'])).sessions.map((s: any) => s.key).find((k: string) => k.startsWith('deltachat:default:group:group:'));
    expect(await inbound(key)).to.deep.equal(['just chatting among ourselves', 'gw: what is up?', 'and then?']);
    expect(upstream.requests).to.have.length(2);
  });

  it('kill -9 with messages waiting: the engine keeps them, and each is stored and answered once after the restart', async () => {
    const dan = await approved('dan');
    const slow = new Set(['question 2']);
    upstream.responder = (request) => {
      const question = String(request.body.messages.at(-1).content);
      return { ...openaiText(`Answer: ${question}`), ...(slow.delete(question) ? { delayMs: 60_000 } : {}) };
    };
    await dan.say('question 1');
    await dan.waitFor(/question 1/);
    await dan.say('question 2');
    await waitFor(() => (upstream.requests.length === 2 ? true : undefined), 30_000, 'the second question at the model');
    process.kill(home.lock().pid, 'SIGKILL');
    await dan.say('question 3');
    await sleep(3000);
    const started = await home.run(['start']);
    expect(started.code, started.stderr).to.equal(0);
    await connected();
    await dan.waitFor(/question 3/);
    await dan.waitFor(/question 2/);
    await sleep(3000);
    const answers = (await dan.texts()).filter((text) => text.startsWith('Answer'));
    expect([...answers].sort()).to.deep.equal(['Answer: question 1', 'Answer: question 2', 'Answer: question 3']);
    expect(await inbound(`deltachat:default:dm:${dan.address}`), 'each stored once').to.deep.equal(['question 1', 'question 2', 'question 3']);
  });

  it('a plain mail is refused with nothing stored; a second key with an approved address is someone else; bad settings and peers are refused with what to do', async () => {
    const eve = await approved('eve');
    // Anyone can write any From: a plain mail naming an approved person is not them.
    const forger = new MailPerson(servers, `forger${++serial}`);
    await forger.send({ to: bot, from: eve.address, envelope: forger.address, subject: 'hi', text: 'FORGED plain mail' });
    await eve.say('the real one');
    await eve.waitFor(/the real one/);
    await sleep(2000);
    expect(home.stateText()).to.not.include('FORGED');
    expect((await forger.inbox()).length, 'no pairing code to a plain mail').to.equal(0);
    expect(upstream.requests).to.have.length(1);

    // A new key for the same address (someone else's engine claiming it) pairs on its own, under a name of its own.
    const impostor = await DeltaChatPerson.start(servers, 'impostor', eve.address);
    people.push(impostor);
    await impostor.join(await invite());
    await impostor.say('it is me, eve');
    await impostor.waitFor(/pairing code is/);
    const requests = (await json(['pair', 'list', 'deltachat'])).requests as { sender: string }[];
    expect(requests).to.have.length(1);
    expect(requests[0]!.sender).to.match(new RegExp(`^${eve.address.replace(/[.]/g, '\\.')}#\\d+$`));
    expect(upstream.requests, 'the impostor reached no agent').to.have.length(1);

    const bad = await home.run(['config', 'set', 'channels.deltachat.address', 'not-an-address']);
    expect(bad.code).to.equal(2);
    const peer = await home.run(['message', 'send', '--channel', 'deltachat', '--to', 'nobody', 'hello?']);
    expect(peer.code).to.equal(2);
    expect(peer.stderr).to.include('is not a Delta Chat address');
    const unknown = await home.run(['message', 'send', '--channel', 'deltachat', '--to', `stranger@${bot.split('@')[1]}`, 'hello?', '--json']);
    expect(unknown.code).to.equal(1);
    expect(JSON.stringify(unknown.json)).to.include('no key for');

    await set('channels.deltachat.imap', 'imap://mail.example.org:143');
    expect((await home.run(['restart'])).code).to.equal(0);
    const refused = await waitFor(async () => {
      const now = await state();
      return now.state === 'error' ? now : undefined;
    }, 30_000, 'the account in error');
    expect(refused.detail).to.include('acceptInvalidCertificates is refused');
    const doctor = await home.run(['doctor', '--json']);
    const check = (doctor.json.checks as { name: string; status: string; detail: string }[]).find((c) => c.name === 'deltachat')!;
    expect(check.status).to.equal('ok');
    expect(check.detail).to.include('deltachat-rpc-server');
    expect((await home.run(['secrets', 'unset', 'channels.deltachat.password'])).code).to.equal(0);
    const noPassword = (await home.run(['doctor', '--json'])).json.checks.find((c: any) => c.name === 'deltachat');
    expect(noPassword.status).to.equal('fail');
    expect(noPassword.fix).to.include('gateway secrets set channels.deltachat.password');
  });
});
