import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { get as httpsGet } from 'node:https';
import * as sdk from '@matrix-org/matrix-sdk-crypto-wasm';
import { xml } from '@xmpp/client';
import { freePort, Home, sleep, waitFor } from '../support/cli.ts';
import { DeltaChatPerson } from '../support/deltachat.ts';
import { codeIn } from '../support/irc.ts';
import { MailServers } from '../support/mail.ts';
import { EncryptedPerson } from '../support/matrix-crypto.ts';
import { Homeserver, MatrixPerson } from '../support/matrix-homeserver.ts';
import { Prosody, trust, XMPP_DOMAIN, XmppUser } from '../support/prosody.ts';
import { openaiText, ScriptedUpstream } from '../support/scripted-upstream.ts';
import { SignalCli } from '../support/signal-cli.ts';
import { SlackApi, type SlackFile } from '../support/slack-api.ts';
import { flat, secondsOf, tone, voiceEngines, voiceNote } from '../support/voice.ts';

/**
 * Voice notes on the channels beyond Telegram's: each heard before the agent
 * runs (real espeak-ng, pocketsphinx, ffmpeg), and the answer spoken back in
 * the platform's own voice-note format where the platform carries one.
 */
const spoken = (phrase: string) => new RegExp(`^\\[spoken in a voice note, \\d s\\] ${phrase}$`);
/** AAC in ADTS frames, as Signal's and Delta Chat's apps record it: each frame starts with the sync word 0xFFF. */
const isAdts = (data: Uint8Array) => data[0] === 0xff && ((data[1] ?? 0) & 0xf6) === 0xf0;
const isOggOpus = (data: Uint8Array) => Buffer.from(data).subarray(0, 4).toString() === 'OggS' && Buffer.from(data).includes(Buffer.from('OpusHead'));

describe('voice notes on Signal, Slack, Matrix, XMPP and Delta Chat: heard before the agent runs, answered in the platform\'s voice-note format (e2e, real engines)', function () {
  this.timeout(240_000);
  let engines: ReturnType<typeof voiceEngines>;
  let upstream: ScriptedUpstream;
  let home: Home | undefined;
  const cleanups: (() => Promise<unknown> | unknown)[] = [];

  /** A profile whose agent the scripted model answers, with the voice engines set up. */
  const profile = async (env: Record<string, string> = {}) => {
    home = new Home({ GATEWAY_PORT: String(await freePort()), ...env });
    await home.set('voice', engines.settings);
    await home.set('models.providers.script', { kind: 'openai-compatible', baseUrl: upstream.url, models: ['m'], retries: { max: 0 } });
    await home.set('agents.helper', { model: 'script/m' });
    return home;
  };
  const start = async (channel: string) => {
    const started = await home!.run(['start']);
    expect(started.code, started.stderr).to.equal(0);
    await waitFor(async () => ((await home!.json(['channels', 'status'])).channels.find((c: any) => c.channel === channel)?.state === 'connected' ? true : undefined), 60_000, `${channel} to connect`);
  };
  const heard = () => flat(upstream.requests.at(-1)!.body.messages.at(-1).content);
  const inbound = async (key: string) => (await home!.json(['sessions', 'show', key])).messages.find((message: any) => message.direction === 'in');

  before(async () => {
    engines = voiceEngines();
    upstream = await new ScriptedUpstream().start();
  });
  after(async () => {
    engines.remove();
    await upstream.stop();
  });
  beforeEach(() => {
    upstream.requests.splice(0);
  });
  afterEach(async () => {
    home?.cleanup();
    home = undefined;
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  it('Signal: a voice note (AAC, unnamed) reaches the agent as words; when-spoken-to answers with an AAC attachment; a note too long is answered with why; a stranger\'s is never fetched', async () => {
    const BOT = '+15550000001';
    const cli = await new SignalCli({ accounts: [BOT] }).start();
    cleanups.push(() => cli.stop());
    const ann = cli.person('Ann');
    await profile();
    await home!.set('channels.signal', { enabled: true, account: BOT, rpcUrl: cli.url, agent: 'helper', allowFrom: [ann.number], voiceReplies: 'when-spoken-to', reconnectMaxDelayMs: 2000 });
    await start('signal');
    upstream.responder = () => openaiText('The lights are on.');

    cli.say(ann, '', { files: [cli.file(voiceNote('turn on the lights', 'aac'), 'audio/aac')] });
    const back = await waitFor(() => cli.attachments.find((file) => file.to === ann.number), 90_000, 'a voice note back');
    expect(heard()).to.match(spoken('turn on the lights'));
    expect(cli.texts(ann).filter(Boolean)).to.deep.equal(['The lights are on.']);
    expect(back).to.include({ contentType: 'audio/aac', name: 'answer.aac', text: '' });
    expect(isAdts(back.data), 'AAC in ADTS frames').to.equal(true);
    expect(secondsOf(back.data)).to.be.greaterThan(0.5);
    const said = await inbound(`signal:default:dm:${ann.number}`);
    expect(said.data.attachments[0]).to.include({ name: 'voice.aac', mimeType: 'audio/aac', voice: true, kept: true, transcript: 'turn on the lights' });
    const shown = await home!.run(['sessions', 'show', `signal:default:dm:${ann.number}`]);
    expect(shown.stdout).to.match(/\[spoken in a voice note, \d s\] turn on the lights/);

    // Too long: answered with why, and the agent is not run for it.
    const asked = upstream.requests.length;
    cli.say(ann, '', { files: [cli.file(tone(9, 'aac'), 'audio/aac')] });
    expect(await waitFor(() => cli.texts(ann).filter(Boolean)[1], 60_000, 'why the note was not heard')).to.equal('Sorry, I could not listen to your voice note: it is longer than 6 seconds, the longest I listen to; please send a shorter one, or write.');
    expect(upstream.requests).to.have.length(asked);

    // A stranger's voice note: a pairing code, the file never fetched.
    const cal = cli.person('Cal');
    cli.say(cal, '', { files: [cli.file(voiceNote('turn off the radio', 'aac'), 'audio/aac')] });
    expect(await waitFor(() => cli.texts(cal)[0], 30_000, 'a pairing code')).to.match(/pairing code is/);
    await sleep(1000);
    expect(cli.calls.filter((call) => call.method === 'getAttachment'), 'only Ann\'s two notes were fetched').to.have.length(2);
  });

  it('Slack: a recorded clip (slack_audio, WebM/Opus) reaches the agent as words; when-spoken-to uploads the answer as an OGG/Opus file after its text', async () => {
    const slack = await new SlackApi().start();
    cleanups.push(() => slack.stop());
    slack.user('U0VOICE', 'Vic');
    await profile();
    await home!.set('channels.slack', { enabled: true, apiRoot: slack.apiRoot, agent: 'helper', allowFrom: ['U0VOICE'], voiceReplies: 'when-spoken-to', reconnectMaxDelayMs: 2000 });
    for (const [name, value] of [['botToken', slack.botToken], ['appToken', slack.appToken]]) {
      expect((await home!.run(['secrets', 'set', `channels.slack.${name}`], { input: value })).code).to.equal(0);
    }
    await start('slack');
    upstream.responder = () => openaiText('The radio is off.');

    const clip = { ...slack.file(voiceNote('turn off the radio', 'webm'), 'audio_message.webm', 'audio/webm'), subtype: 'slack_audio' } as SlackFile;
    slack.message({ user: 'U0VOICE', channel: 'D0VOICE1', text: '', files: [clip] });
    const upload = await waitFor(() => [...slack.uploads.values()].find((entry) => entry.channel === 'D0VOICE1'), 90_000, 'a voice note uploaded');
    expect(heard()).to.match(spoken('turn off the radio'));
    expect(slack.posted('D0VOICE1').map((call) => call.body.text)).to.deep.equal(['The radio is off.']);
    expect(upload).to.include({ name: 'answer.ogg' });
    expect(upload.comment, 'no caption: the text went just before').to.equal(undefined);
    expect(isOggOpus(upload.data!)).to.equal(true);
    expect((await inbound('slack:default:dm:U0VOICE')).data.attachments[0]).to.include({ voice: true, transcript: 'turn off the radio' });
  });

  it('Matrix: when-spoken-to answers a voice message with an m.audio voice message (OGG/Opus in the media store, its duration, MSC3245\'s mark)', async () => {
    const hs = await new Homeserver().start();
    cleanups.push(() => hs.stop());
    const bot = hs.register('gwbot', 'Gateway Bot');
    const dora = new MatrixPerson(hs, 'dora');
    cleanups.push(() => dora.quit());
    await profile();
    await home!.set('channels.matrix', { enabled: true, homeserver: hs.url, agent: 'helper', allowFrom: [dora.userId], voiceReplies: 'when-spoken-to', encryption: false, reconnectMaxDelayMs: 2000 });
    expect((await home!.run(['secrets', 'set', 'channels.matrix.accessToken'], { input: bot.token })).code).to.equal(0);
    await start('matrix');
    const room = await dora.directChat(bot.userId);
    await waitFor(() => (hs.membership(room, bot.userId) === 'join' ? true : undefined), 20_000, 'the bot to join');
    upstream.responder = () => openaiText('Heating is on.');

    const note = voiceNote('turn on the heating');
    await dora.say(room, 'Voice message', {
      msgtype: 'm.audio', url: await dora.upload(note, 'audio/ogg'), info: { mimetype: 'audio/ogg', size: note.length, duration: 2000 },
      'org.matrix.msc1767.audio': { duration: 2000, waveform: [] }, 'org.matrix.msc3245.voice': {},
    });
    await dora.waitFor(room, /^Heating is on\.$/, { from: bot.userId, timeoutMs: 60_000 });
    const audio = await waitFor(() => dora.received.find((event) => event.room_id === room && event.sender === bot.userId && event.content?.msgtype === 'm.audio'), 60_000, 'a voice message back');
    expect(heard()).to.match(spoken('turn on the heating'));
    expect(audio.content).to.include({ body: 'Voice message', filename: 'answer.ogg' });
    expect(audio.content['org.matrix.msc3245.voice']).to.deep.equal({});
    expect(audio.content.info).to.include({ mimetype: 'audio/ogg' });
    const stored = hs.mediaOf(audio.content.url)!;
    expect(stored.type).to.equal('audio/ogg');
    expect(isOggOpus(stored.bytes)).to.equal(true);
    expect(audio.content.info.size).to.equal(stored.bytes.length);
    // Its length, as Element shows it: what ffprobe reads, to within a tenth of a second.
    const duration = audio.content['org.matrix.msc1767.audio'].duration;
    expect(audio.content.info.duration).to.equal(duration);
    expect(Math.abs(duration / 1000 - secondsOf(stored.bytes))).to.be.lessThan(0.1);
  });

  it('Matrix, end to end encrypted: an encrypted voice message is heard; the answer and its voice note go encrypted (only ciphertext on the media store)', async () => {
    const hs = await new Homeserver().start();
    cleanups.push(() => hs.stop());
    const bot = hs.register('gwbot', 'Gateway Bot');
    const gus = await EncryptedPerson.make(hs, 'gus');
    cleanups.push(() => gus.quit());
    await profile();
    await home!.set('channels.matrix', { enabled: true, homeserver: hs.url, agent: 'helper', allowFrom: [gus.userId], voiceReplies: 'when-spoken-to', reconnectMaxDelayMs: 2000 });
    expect((await home!.run(['secrets', 'set', 'channels.matrix.accessToken'], { input: bot.token })).code).to.equal(0);
    await start('matrix');
    const room = await gus.directChat(bot.userId, { encrypted: true });
    await waitFor(() => (hs.membership(room, bot.userId) === 'join' ? true : undefined), 30_000, 'the bot to join');
    upstream.responder = () => openaiText('The radio is on.');

    const note = voiceNote('turn on the radio');
    const encrypted = sdk.Attachment.encrypt(new Uint8Array(note));
    const url = await gus.upload(Buffer.from(encrypted.encryptedData), 'application/octet-stream');
    await gus.sayEncrypted(room, {
      msgtype: 'm.audio', body: 'Voice message', file: { ...JSON.parse(encrypted.mediaEncryptionInfo!), url }, info: { mimetype: 'audio/ogg', size: note.length, duration: 2000 },
      'org.matrix.msc1767.audio': { duration: 2000, waveform: [] }, 'org.matrix.msc3245.voice': {},
    });
    const answer = await gus.waitFor(room, /^The radio is on\.$/, { from: bot.userId, timeoutMs: 60_000 });
    expect(answer.decrypted, 'the answer is encrypted').to.include({ senderDevice: bot.deviceId });
    expect(heard()).to.match(spoken('turn on the radio'));
    const key = `matrix:default:dm:${gus.userId}`;
    await waitFor(async () => ((await home!.json(['sessions', 'show', key])).messages.at(-1)?.delivery?.status === 'sent' ? true : undefined), 30_000, 'the answer delivered');
    // The voice note: an encrypted event whose file only the person's device can open.
    const voice = await gus.waitFor(room, /^Voice message$/, { from: bot.userId, timeoutMs: 60_000 });
    expect(voice.decrypted, 'the voice note is encrypted').to.include({ senderDevice: bot.deviceId });
    expect(voice.content).to.include({ msgtype: 'm.audio' }).and.to.have.property('org.matrix.msc3245.voice');
    expect(voice.content.url, 'no address in the clear').to.equal(undefined);
    const file = voice.content.file;
    const ciphertext = await gus.download(file.url);
    expect(hs.mediaOf(file.url)!.type, 'the homeserver is told nothing of the audio').to.equal('application/octet-stream');
    const clear = Buffer.from(sdk.Attachment.decrypt(new sdk.EncryptedAttachment(new Uint8Array(ciphertext), JSON.stringify({ v: file.v, key: file.key, iv: file.iv, hashes: file.hashes }))));
    expect(clear.subarray(0, 4).toString('latin1'), 'OGG/Opus once decrypted').to.equal('OggS');
    expect(ciphertext.subarray(0, 4).toString('latin1')).to.not.equal('OggS');
  });

  it('XMPP: an audio file offered out of band (XEP-0066, as Conversations sends a voice message) reaches the agent as words; a stranger\'s is never fetched; when-spoken-to answers with OGG/Opus through the server\'s HTTP upload', async () => {
    const prosody = await Prosody.start({ upload: true });
    cleanups.push(() => prosody.stop());
    prosody.register('gwbot', 'bot-password');
    trust(prosody.certificate);
    // The sender's upload service, on this host (the account's server is on loopback too).
    const fetched: string[] = [];
    const files = new Map<string, Buffer>();
    const upload: Server = createServer((req, res) => {
      fetched.push(req.url ?? '');
      const data = files.get(req.url ?? '');
      if (!data) return void res.writeHead(404).end();
      res.writeHead(200, { 'content-type': 'audio/mp4', 'content-length': String(data.length) }).end(data);
    });
    await new Promise<void>((resolve) => upload.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise((resolve) => upload.close(resolve)));
    const base = `http://127.0.0.1:${(upload.address() as { port: number }).port}`;
    const offer = (person: XmppUser, path: string, audio: Buffer) => {
      files.set(path, audio);
      const url = `${base}${path}`;
      return person.client.send(xml('message', { to: `gwbot@${XMPP_DOMAIN}`, type: 'chat', id: `v${Math.random().toString(36).slice(2)}` },
        xml('body', {}, url), xml('x', { xmlns: 'jabber:x:oob' }, xml('url', {}, url))));
    };
    prosody.register('erin', 'pw-of-a-person');
    prosody.register('zed', 'pw-of-a-person');
    const erin = await XmppUser.connect(prosody, 'erin', 'pw-of-a-person');
    const zed = await XmppUser.connect(prosody, 'zed', 'pw-of-a-person');
    cleanups.push(() => erin.quit(), () => zed.quit());
    await profile({ NODE_EXTRA_CA_CERTS: prosody.certificate });
    await home!.set('channels.xmpp', { enabled: true, jid: `gwbot@${XMPP_DOMAIN}`, service: `xmpp://127.0.0.1:${prosody.port}`, agent: 'helper', allowFrom: [erin.jid], voiceReplies: 'when-spoken-to', reconnectMaxDelayMs: 2000 });
    expect((await home!.run(['secrets', 'set', 'channels.xmpp.password'], { input: 'bot-password' })).code).to.equal(0);
    await start('xmpp');
    upstream.responder = () => openaiText('Lights on.');

    await offer(zed, '/upload/zed/secret.m4a', voiceNote('turn off the lights', 'm4a'));
    expect((await zed.waitFor(/pairing code is/, { timeoutMs: 30_000 })).text).to.match(/gateway pair approve xmpp [A-Z2-9]{8}/);

    await offer(erin, '/upload/erin/2024-05-01_voice.m4a', voiceNote('turn on the lights', 'm4a'));
    expect((await erin.waitFor(/^Lights on\.$/, { timeoutMs: 60_000 })).type).to.equal('chat');
    expect(heard()).to.match(/^\[spoken in an audio file 2024-05-01_voice\.m4a, \d s\] turn on the lights$/);
    expect(fetched, 'only the approved sender\'s file was fetched').to.deep.equal(['/upload/erin/2024-05-01_voice.m4a']);
    const said = await inbound(`xmpp:default:dm:${erin.jid}`);
    expect(said.text, 'the URL is not taken for words').to.equal('');
    expect(said.data.attachments[0]).to.include({ name: '2024-05-01_voice.m4a', mimeType: 'audio/mp4', kept: true, transcript: 'turn on the lights' });
    // The voice answer: uploaded to the server's upload service (XEP-0363), its https address as body and out-of-band data.
    const link = await erin.waitFor(/^https:\/\/.*\.ogg$/, { timeoutMs: 60_000 });
    expect(link.element.getChild('x', 'jabber:x:oob')?.getChildText('url')).to.equal(link.text);
    const audio = await new Promise<Buffer>((resolve, reject) => {
      httpsGet(link.text, { ca: readFileSync(prosody.certificate) }, (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => (response.statusCode === 200 ? resolve(Buffer.concat(chunks)) : reject(new Error(`GET ${link.text}: HTTP ${response.statusCode}`))));
      }).on('error', reject);
    });
    expect(audio.subarray(0, 4).toString('latin1'), 'OGG/Opus').to.equal('OggS');
    expect(erin.received.map((message) => message.text)).to.deep.equal(['Lights on.', link.text]);
  });

  it('Delta Chat: a voice message (viewtype Voice) reaches the agent as words; when-spoken-to answers with a voice message of AAC (real postfix and dovecot)', async () => {
    const servers = await MailServers.start();
    cleanups.push(() => servers.stop());
    const bot = servers.addUser('gwbot', 'bot-password');
    await profile();
    await home!.set('channels.deltachat', {
      enabled: true, address: bot, imap: `imap://127.0.0.1:${servers.imapPort}`, smtp: `smtp://127.0.0.1:${servers.smtpPort}`, acceptInvalidCertificates: true,
      displayName: 'gw', agent: 'helper', voiceReplies: 'when-spoken-to', reconnectMaxDelayMs: 2000,
    });
    expect((await home!.run(['secrets', 'set', 'channels.deltachat.password'], { input: 'bot-password' })).code).to.equal(0);
    await start('deltachat');
    const status = (await home!.json(['channels', 'status'])).channels.find((c: any) => c.channel === 'deltachat');
    const fay = await DeltaChatPerson.start(servers, 'fay');
    cleanups.push(() => fay.stop());
    await fay.join(/https:\/\/i\.delta\.chat\/#\S+/.exec(status.detail)![0]);
    await fay.say('hello');
    expect((await home!.run(['pair', 'approve', 'deltachat', codeIn(await fay.waitFor(/pairing code is/, { timeoutMs: 60_000 }))])).code).to.equal(0);
    upstream.responder = () => openaiText('The radio is on.');

    await fay.sendVoice(voiceNote('turn on the radio', 'aac'));
    expect(await fay.waitFor(/^The radio is on\.$/, { timeoutMs: 90_000 })).to.equal('The radio is on.');
    expect(heard()).to.match(spoken('turn on the radio'));
    const back = await waitFor(async () => (await fay.files()).find((file) => file.viewType === 'Voice'), 60_000, 'a voice message back');
    const data = readFileSync(back.file);
    expect(isAdts(data), 'AAC in ADTS frames').to.equal(true);
    expect(secondsOf(data)).to.be.greaterThan(0.5);
    const said = await inbound(`deltachat:default:dm:${fay.address}`);
    expect(said.data.attachments[0]).to.include({ voice: true, kept: true, transcript: 'turn on the radio' });
  });
});
