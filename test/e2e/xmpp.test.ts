import { expect } from 'chai';
import { mkdirSync, readFileSync, truncateSync, writeFileSync } from 'node:fs';
import { get } from 'node:https';
import { join } from 'node:path';
import { freePort, Home, sleep, waitFor } from '../support/cli.ts';
import { codeIn } from '../support/irc.ts';
import { LatencyProxy } from '../support/latency-proxy.ts';
import { xml } from '@xmpp/client';
import { MUC_DOMAIN, Prosody, trust, UPLOAD_LIMIT, XMPP_DOMAIN, XmppUser } from '../support/prosody.ts';
import { openaiText, openaiToolCalls, ScriptedUpstream } from '../support/scripted-upstream.ts';

describe('XMPP channel against a real Prosody (e2e)', function () {
  this.timeout(90_000);
  let prosody: Prosody;
  /** A second server, without HTTP upload; the daemon trusts both servers' certificates (caBundle). */
  let bare: Prosody;
  let caBundle: string;
  let upstream: ScriptedUpstream;
  let home: Home;
  const people: XmppUser[] = [];
  let serial = 0;
  const room = `lobby@${MUC_DOMAIN}`;
  const bot = `gwbot@${XMPP_DOMAIN}`;

  const person = async (name: string) => {
    const user = `${name}${++serial}`;
    prosody.register(user, 'pw-of-a-person');
    const made = await XmppUser.connect(prosody, user, 'pw-of-a-person');
    people.push(made);
    return made;
  };
  const state = async () => (await home.run(['channels', 'status', '--json'])).json?.channels?.find((c: any) => c.channel === 'xmpp') as { state: string; detail?: string } | undefined;
  const connected = () => waitFor(async () => ((await state())?.state === 'connected' ? true : undefined), 20_000, 'the gateway to connect to Prosody');
  const set = (key: string, value: unknown) => home.set(key, value);

  before(async () => {
    prosody = await Prosody.start({ upload: true });
    prosody.register('gwbot', 'bot-password');
    trust(prosody.certificate);
    bare = await Prosody.start();
    bare.register('gwbot', 'bot-password');
    trust(bare.certificate);
    caBundle = join(bare.dir, 'trusted.pem');
    writeFileSync(caBundle, readFileSync(prosody.certificate, 'utf8') + readFileSync(bare.certificate, 'utf8'));
    upstream = await new ScriptedUpstream().start();
    upstream.responder = (request) => openaiText(`Echo: ${String((request.body.messages as { content: string }[]).at(-1)?.content)}`);
  });
  after(async () => {
    await prosody?.stop();
    await bare?.stop();
    await upstream?.stop();
  });
  beforeEach(async () => {
    home = new Home({ GATEWAY_PORT: String(await freePort()), NODE_EXTRA_CA_CERTS: caBundle });
    await set('models.providers.script', { kind: 'openai-compatible', baseUrl: upstream.url, models: ['m'], retries: { max: 0 } });
    await set('agents.helper', { model: 'script/m' });
    await set('channels.xmpp', { enabled: true, jid: bot, service: `xmpp://127.0.0.1:${prosody.port}`, agent: 'helper', rooms: [room], nick: 'gwbot', reconnectMaxDelayMs: 2000 });
    const secret = await home.run(['secrets', 'set', 'channels.xmpp.password'], { input: 'bot-password' });
    expect(secret.code, secret.stderr).to.equal(0);
    expect((await home.run(['start'])).code).to.equal(0);
  });
  afterEach(async () => {
    await Promise.all(people.splice(0).map((user) => user.quit()));
    home.cleanup();
  });

  it('a stranger gets a pairing code by chat; approved, the agent answers over STARTTLS; the password is only in the secret store', async () => {
    await connected();
    expect((await state())!.detail).to.match(new RegExp(`^${bot}/`));
    const alice = await person('alice');
    alice.say(bot, 'hello, who is there?');
    const code = codeIn((await alice.waitFor(/pairing code is/)).text);
    const before = alice.received.length;
    await sleep(1000);
    expect(alice.received.length, 'a stranger gets the code and nothing else').to.equal(before);
    expect((await home.run(['pair', 'approve', 'xmpp', code])).code).to.equal(0);
    const seen = alice.received.length;
    await alice.say(bot, 'What is XMPP?');
    const answer = await alice.waitFor(/^Echo: What is XMPP\?$/, { after: seen, timeoutMs: 20_000 });
    expect(answer).to.include({ type: 'chat' });
    expect(answer.from.startsWith(`${bot}/`)).to.equal(true);
    const session = (await home.run(['sessions', 'show', `xmpp:default:dm:${alice.jid}`, '--json'])).json;
    expect(session.messages.map((m: any) => m.text)).to.include.members(['What is XMPP?', 'Echo: What is XMPP?']);
    const config = (await home.run(['config', 'get', 'channels.xmpp', '--json'])).stdout;
    expect(config).to.not.include('bot-password');
  });

  it('answers in a MUC room only when its nick is mentioned, and not its own echo or the room\'s history', async () => {
    await connected();
    const bob = await person('bob');
    await bob.join(room, 'bob');
    await sleep(500);
    const seen = bob.received.length;
    await bob.say(room, 'just chatting among ourselves', 'groupchat');
    await bob.say(room, 'gwbot: what time is it?', 'groupchat');
    const answer = await bob.waitFor(/^Echo: /, { after: seen, timeoutMs: 20_000, from: `${room}/gwbot` });
    expect(answer.type).to.equal('groupchat');
    expect(answer.text).to.include('what time is it?');
    await sleep(1500);
    expect(bob.received.slice(seen).filter((m) => m.from === `${room}/gwbot`), 'only the mention is answered').to.have.length(1);
    const sessions = (await home.run(['sessions', 'list', '--json'])).json.sessions as any[];
    expect(sessions.map((s) => s.key)).to.include(`xmpp:default:group:${room}`);
  });

  it('survives the server going away: it reconnects by itself, and a reply made meanwhile is delivered once', async () => {
    await connected();
    const carol = await person('carol');
    await set('channels.xmpp.allowFrom', [carol.jid]);
    // The model takes a while; the server goes down meanwhile; the reply waits in the outbox.
    upstream.enqueue({ ...openaiText('Delivered after the restart.'), delayMs: 2500 });
    await carol.say(bot, 'slow question');
    await waitFor(async () => (upstream.requests.length > 0 ? true : undefined), 10_000, 'the run to ask its model');
    // Carol's client goes away with the server; she comes back later on a new one.
    await carol.quit();
    await prosody.halt();
    await waitFor(async () => ((await state())?.state !== 'connected' ? true : undefined), 15_000, 'the gateway to notice');
    await sleep(3000);
    await prosody.resume();
    await connected();
    const back = await XmppUser.connect(prosody, carol.jid.split('@')[0]!, 'pw-of-a-person');
    people.push(back);
    // Offline messages are not kept by this server: the reply is sent again by the gateway once it is back, or held until then.
    const seenBack = back.received.length;
    await back.say(bot, 'are you back?');
    await back.waitFor(/^Echo: are you back\?$/, { after: seenBack, timeoutMs: 30_000 });
    const shown = (await home.run(['sessions', 'show', `xmpp:default:dm:${carol.jid}`, '--json'])).json;
    const delayed = shown.messages.find((m: any) => m.text === 'Delivered after the restart.');
    expect(delayed.delivery.status, 'the reply made while the server was down went out once it was back').to.equal('sent');
    expect(delayed.delivery.attempts).to.be.at.least(1);
  });

  it('a dropped connection resumes its stream (XEP-0198): connected again, and what was said meanwhile is answered once', async () => {
    const proxy = await LatencyProxy.start({ host: '127.0.0.1', port: prosody.port }, 0);
    try {
      await set('channels.xmpp.service', `xmpp://127.0.0.1:${proxy.port}`);
      expect((await home.run(['restart'])).code).to.equal(0);
      await connected();
      const erin = await person('erin');
      await set('channels.xmpp.allowFrom', [erin.jid]);
      const seen = erin.received.length;
      proxy.cut();
      await waitFor(async () => ((await state())?.state !== 'connected' ? true : undefined), 15_000, 'the gateway to notice the drop');
      await erin.say(bot, 'said while the stream was down');
      await connected();
      await erin.waitFor(/^Echo: said while the stream was down$/, { after: seen, timeoutMs: 30_000 });
      await sleep(1500);
      expect(erin.received.slice(seen).filter((m) => m.text.startsWith('Echo: ')), 'answered once').to.have.length(1);
      const log = (await home.run(['logs', '-n', '300', '--raw'])).stdout;
      expect(log, 'the stream was taken up again, not a new login').to.include('XMPP stream resumed');
    } finally {
      await proxy.stop();
    }
  });

  it('takes odd and hostile stanzas without stopping, and comes back after the server is killed mid-stream', async () => {
    await connected();
    const dave = await person('dave');
    await set('channels.xmpp.allowFrom', [dave.jid]);
    const seen = dave.received.length;
    const send = (attrs: Record<string, string>, ...children: ReturnType<typeof xml>[]) => dave.client.send(xml('message', { to: bot, id: `x${Math.random().toString(36).slice(2)}`, ...attrs }, ...children));
    await send({ type: 'chat' }, xml('body', {}, ''));
    await send({ type: 'chat' }, xml('body', {}, '   \n  '));
    await send({ type: 'chat' }, xml('active', { xmlns: 'http://jabber.org/protocol/chatstates' }));
    await send({ type: 'headline' }, xml('body', {}, 'a headline is not a conversation'));
    await send({ type: 'error' }, xml('body', {}, 'an error is not a turn'), xml('error', { type: 'cancel' }));
    await send({ type: 'chat' }, xml('x', { xmlns: 'jabber:x:oob' }, xml('url', {}, 'https://example.org/a.png')));
    await send({ type: 'chat' }, xml('unknown', { xmlns: 'urn:example:nothing' }, xml('deep', {}, xml('deeper', {}, 'x'))), xml('body', {}, 'first of two bodies'), xml('body', { 'xml:lang': 'de' }, 'zweiter'));
    await send({ type: 'chat' }, xml('body', {}, 'y'.repeat(50_000)));
    await dave.say(bot, 'still there?');
    await dave.waitFor(/^Echo: still there\?$/, { after: seen, timeoutMs: 20_000 });
    await sleep(1000);
    const answers = dave.received.slice(seen).map((message) => message.text);
    expect(answers.filter((text) => text.startsWith('Echo: first of two bodies')), 'the first body is the text').to.have.length(1);
    expect(answers.join('').includes('headline') || answers.join('').includes('an error is not'), 'headlines and errors are not turns').to.equal(false);
    // The long one is cut to what is taken from one message, and its answer split to what one message carries.
    const long = answers.filter((text) => /^(Echo: )?y+$/.test(text));
    expect(long.join('').length).to.equal('Echo: '.length + 16_384);
    expect((await state())!.state).to.equal('connected');

    // The server is killed: the stream ends mid-way, without a closing tag. The account reconnects by itself.
    await dave.quit();
    await prosody.halt('SIGKILL');
    await waitFor(async () => ((await state())?.state !== 'connected' ? true : undefined), 15_000, 'the gateway to notice');
    await prosody.resume();
    await connected();
    const back = await XmppUser.connect(prosody, dave.jid.split('@')[0]!, 'pw-of-a-person');
    people.push(back);
    const seenBack = back.received.length;
    await back.say(bot, 'after the crash');
    await back.waitFor(/^Echo: after the crash$/, { after: seenBack, timeoutMs: 30_000 });
  });

  it('refuses a server without STARTTLS before sending the password, and plaintext for anything but a loopback server', async () => {
    const plain = await Prosody.start({ plaintext: true });
    try {
      plain.register('gwbot', 'bot-password');
      await set('channels.xmpp.service', `xmpp://127.0.0.1:${plain.port}`);
      expect((await home.run(['restart'])).code).to.equal(0);
      const refused = await waitFor(async () => {
        const now = await state();
        return now?.state === 'error' ? now : undefined;
      }, 20_000, 'the account to refuse the plaintext stream');
      expect(refused.detail).to.match(/offered no STARTTLS: nothing was sent/);
      expect(plain.output, 'the server saw no login').to.not.match(/Authenticated as gwbot/);

      await set('channels.xmpp.allowPlaintext', true);
      expect((await home.run(['restart'])).code).to.equal(0);
      await connected();

      await set('channels.xmpp.service', 'xmpp://xmpp.example.org:5222');
      expect((await home.run(['restart'])).code).to.equal(0);
      const remote = await waitFor(async () => {
        const now = await state();
        return now?.state === 'error' ? now : undefined;
      }, 20_000, 'the account to refuse plaintext to another host');
      expect(remote.detail).to.match(/allowPlaintext is refused for a server that is not on this host/);
    } finally {
      await plain.stop();
    }
  });

  /** The bytes at an address the person was sent, fetched as their client does (over https, trusting the server's certificate). */
  const fetched = (url: string) => new Promise<Buffer>((resolve, reject) => {
    get(url, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => (response.statusCode === 200 ? resolve(Buffer.concat(chunks)) : reject(new Error(`GET ${url}: HTTP ${response.statusCode}`))));
    }).on('error', reject);
  });
  /** What the daemon's log says of an outbox entry's tries (the id a refused send names: "(outbox N)"). */
  const triesOf = async (refusal: string) => {
    const id = Number(/\(outbox (\d+)\)/.exec(refusal)?.[1]);
    const lines = (await home.run(['logs', '-n', '1000', '--raw'])).stdout.split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line));
    return lines.filter((line) => line.reply === id).map((line) => ({ msg: line.msg, attempts: line.attempts, error: line.error }));
  };
  const workspace = () => {
    const folder = join(home.profileDir(), 'workspaces', 'helper');
    mkdirSync(folder, { recursive: true });
    return folder;
  };

  it('sends a workspace file through the server\'s HTTP upload (XEP-0363): the person gets its https address as the body and out-of-band data, and fetches the exact bytes', async () => {
    await set('agents.helper.tools', ['message.attach']);
    await connected();
    const fay = await person('fay');
    await set('channels.xmpp.allowFrom', [fay.jid]);
    const report = Buffer.from('%PDF-1.4\nthe weekly report\n');
    writeFileSync(join(workspace(), 'report.pdf'), report);
    const seen = fay.received.length;
    const sent = await home.json(['message', 'send', '--channel', 'xmpp', '--to', fay.jid, '--file', 'report.pdf', 'This week']);
    expect(sent.delivery).to.include({ kind: 'file', status: 'sent' });
    await fay.waitFor(/^This week$/, { after: seen, from: `${bot}/` });
    const link = await fay.waitFor(/^https:\/\//, { after: seen, from: `${bot}/` });
    expect(link.type).to.equal('chat');
    expect(link.text).to.match(new RegExp(`^https://127\\.0\\.0\\.1:${prosody.httpsPort}/file_share/.+/report\\.pdf$`));
    expect(link.element.getChild('x', 'jabber:x:oob')?.getChildText('url'), 'the address as out-of-band data, so clients show the file inline').to.equal(link.text);
    expect((await fetched(link.text)).equals(report)).to.equal(true);

    // An agent attaches a file to its reply: it goes the same way, before the reply's text.
    const png = Buffer.from('89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082', 'hex');
    writeFileSync(join(workspace(), 'chart.png'), png);
    upstream.enqueue(openaiToolCalls([{ name: 'message.attach', args: { path: 'chart.png' } }]), openaiText('Here is the chart.'));
    const asked = fay.received.length;
    await fay.say(bot, 'send me the chart');
    await fay.waitFor(/^Here is the chart\.$/, { after: asked, timeoutMs: 20_000 });
    const chart = await fay.waitFor(/^https:\/\/.*\/chart\.png$/, { after: asked });
    expect((await fetched(chart.text)).equals(png)).to.equal(true);

    // Larger than the server's upload service takes: refused for good, with the reason, after one try.
    writeFileSync(join(workspace(), 'big.bin'), '');
    truncateSync(join(workspace(), 'big.bin'), UPLOAD_LIMIT + 200 * 1024);
    const big = await home.run(['message', 'send', '--channel', 'xmpp', '--to', fay.jid, '--file', 'big.bin', '--json']);
    expect(big.code).to.equal(1);
    expect(big.json.error.message).to.match(/^XMPP: big\.bin \(1\.2 MB\) is larger than the server's upload service takes \(1\.0 MB\)/);
    expect(await triesOf(big.json.error.message), 'given up at once, not retried').to.deep.equal([{ msg: 'a reply could not be delivered; given up', attempts: 1, error: big.json.error.message.replace(/ \(outbox \d+\)\.$/, '') }]);
  });

  it('a server without HTTP upload: a file is refused for good with the reason, recorded in the outbox, never retried', async () => {
    bare.register('gus', 'pw-of-a-person');
    await set('channels.xmpp.service', `xmpp://127.0.0.1:${bare.port}`);
    await set('channels.xmpp.allowFrom', [`gus@${XMPP_DOMAIN}`]);
    expect((await home.run(['restart'])).code).to.equal(0);
    await connected();
    const gus = await XmppUser.connect(bare, 'gus', 'pw-of-a-person');
    people.push(gus);
    writeFileSync(join(workspace(), 'notes.txt'), 'the notes\n');
    const sent = await home.run(['message', 'send', '--channel', 'xmpp', '--to', gus.jid, '--file', 'notes.txt', 'notes', '--json']);
    expect(sent.code).to.equal(1);
    expect(sent.json.error.message).to.include(`the server ${XMPP_DOMAIN} offers no HTTP upload service (XEP-0363), so it cannot carry files`);
    await sleep(3000);
    const tries = await triesOf(sent.json.error.message);
    expect(tries, 'recorded as given up after one try, not tried again').to.have.length(1);
    expect(tries[0]).to.include({ msg: 'a reply could not be delivered; given up', attempts: 1 });
    expect(tries[0]!.error).to.include('offers no HTTP upload service');
    expect(gus.received, 'nothing reached the person').to.have.length(0);
    // Text still goes.
    await home.json(['message', 'send', '--channel', 'xmpp', '--to', gus.jid, 'plain words']);
    await gus.waitFor(/^plain words$/);
  });

  it('lists XMPP among the channel kinds, configured or not', async () => {
    const listed = await home.run(['channels', 'list', '--json']);
    expect(listed.code).to.equal(0);
    expect(JSON.stringify(listed.json)).to.include('"xmpp"');
  });
});
