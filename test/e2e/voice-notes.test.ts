import { expect } from 'chai';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, Home, sleep, waitFor } from '../support/cli.ts';
import { DiscordApi, nextId } from '../support/discord-api.ts';
import { Homeserver, MatrixPerson } from '../support/matrix-homeserver.ts';
import { openaiText, ScriptedUpstream } from '../support/scripted-upstream.ts';
import { TelegramApi, type TgUser } from '../support/telegram-api.ts';
import { flat, GRAMMAR, tone, voiceNote } from '../support/voice.ts';
import { WhatsAppApi } from '../support/whatsapp-api.ts';

const TOKEN = '7001234567:AAH-test-token-for-the-stand-in';
const BOT = 'gw_voice_bot';

describe('voice notes on channels: heard before the agent runs, answered with a voice note (e2e, real espeak-ng, pocketsphinx, ffmpeg)', function () {
  this.timeout(180_000);
  let api: TelegramApi;
  let home: Home;
  let upstream: ScriptedUpstream;
  let folder: string;
  let serial = 0;

  const json = (args: string[]) => home.json(args);
  const set = (key: string, value: unknown) => home.set(key, value);
  const person = (): TgUser => ({ id: 6_000_000 + ++serial, first_name: `Vic${serial}`, username: `vic_${serial}` });
  const chatOf = (user: TgUser) => ({ id: user.id, type: 'private' as const, first_name: user.first_name });
  const sendVoice = (user: TgUser, audio: Buffer, fields: Record<string, unknown> = {}) => {
    const file = api.addFile(audio, `voice/file_${++serial}.oga`);
    return api.message(TOKEN, { chat: chatOf(user), from: user, voice: { ...file, duration: 2, mime_type: 'audio/ogg' }, ...fields });
  };
  const texts = (chatId: number) => api.sent(chatId).map((request) => String(request.body.text));
  const replyFor = (chatId: number, after: number, pattern: RegExp = /\S/) =>
    waitFor(() => texts(chatId).slice(after).find((text) => pattern.test(text)), 60_000, `a message to ${chatId} matching ${pattern}`);
  const voiceCalls = async () => ((await json(['usage'])).byModel as any[]).filter((group) => /pocketsphinx|espeak/.test(JSON.stringify(group)))
    .reduce((sum, group) => sum + Number(group.calls ?? group.count ?? 0), 0);

  before(() => {
    // A folder anyone may read: the engines run as an unprivileged user in the sandbox, which sees it read-only.
    folder = mkdtempSync(join(tmpdir(), 'voice-notes-grammar-'));
    chmodSync(folder, 0o755);
    writeFileSync(join(folder, 'lights.jsgf'), GRAMMAR, { mode: 0o644 });
  });
  after(() => rmSync(folder, { recursive: true, force: true }));

  beforeEach(async () => {
    api = await new TelegramApi().start();
    api.addBot(TOKEN, BOT);
    upstream = await new ScriptedUpstream().start();
    home = new Home({ GATEWAY_PORT: String(await freePort()) });
    await set('voice', {
      transcribe: { kind: 'command', command: ['pocketsphinx_continuous', '-infile', '{input}', '-jsgf', join(folder, 'lights.jsgf'), '-logfn', '/dev/null'], paths: [folder] },
      speak: { kind: 'auto', voice: 'en-us' },
      maxSeconds: 6,
    });
    await set('channels.telegram', { enabled: true, apiRoot: api.apiRoot, agent: 'helper', reconnectMaxDelayMs: 2000 });
    await set('models.providers.script', { kind: 'openai-compatible', baseUrl: upstream.url, models: ['m'], retries: { max: 0 } });
    await set('agents.helper', { model: 'script/m' });
    expect((await home.run(['secrets', 'set', 'channels.telegram.botToken'], { input: TOKEN })).code).to.equal(0);
    const started = await home.run(['start']);
    expect(started.code, started.stderr).to.equal(0);
    await waitFor(async () => ((await json(['channels', 'status'])).channels.find((c: any) => c.channel === 'telegram')?.state === 'connected' ? true : undefined), 20_000, 'the bot to connect');
  });
  afterEach(async () => {
    home.cleanup();
    await api.stop();
    await upstream.stop();
  });

  it('a voice note reaches the agent as the person\'s words, marked as spoken; when-spoken-to answers with a Telegram voice note (OGG/Opus) and its text; sessions show shows the transcript', async () => {
    const ann = person();
    await set('channels.telegram.allowFrom', [String(ann.id)]);
    await set('channels.telegram.voiceReplies', 'when-spoken-to');
    upstream.responder = () => openaiText('The **lights** are on now.');

    sendVoice(ann, voiceNote('turn on the lights'));
    expect(await replyFor(ann.id, 0)).to.equal('The <b>lights</b> are on now.');
    const heard = flat(upstream.requests.at(-1)!.body.messages.at(-1).content);
    expect(heard).to.match(/^\[spoken in a voice note, \d s\] turn on the lights$/);

    // The answer spoken back: Telegram's own voice note, OGG/Opus, after its text.
    const voice = await waitFor(() => api.sent(ann.id, ['sendVoice'])[0], 30_000, 'a voice note back');
    const bytes = voice.body.voice.data as Buffer;
    expect(bytes.subarray(0, 4).toString()).to.equal('OggS');
    expect(bytes.includes(Buffer.from('OpusHead'))).to.equal(true);
    expect(bytes.length).to.be.greaterThan(2000);
    const order = api.requests.filter((request) => ['sendMessage', 'sendVoice'].includes(request.method) && Number(request.body.chat_id) === ann.id).map((request) => request.method);
    expect(order).to.deep.equal(['sendMessage', 'sendVoice']);

    // The session keeps the audio (kept, with its type) and the transcript; the reply's delivery counts the voice note.
    const key = `telegram:default:dm:${ann.id}`;
    const shown = await json(['sessions', 'show', key]);
    const said = shown.messages.find((message: any) => message.direction === 'in');
    expect(said.data.attachments[0]).to.include({ name: 'voice.ogg', mimeType: 'audio/ogg', kept: true, voice: true, transcript: 'turn on the lights' });
    const answer = shown.messages.at(-1);
    expect(answer.delivery).to.include({ status: 'sent', voice: true });
    expect(answer.delivery.receipts).to.have.length(2);
    const human = await home.run(['sessions', 'show', key]);
    expect(human.stdout).to.match(/\[spoken in a voice note, \d s\] turn on the lights/);
    expect(human.stdout).to.match(/sent to \d+ with a voice note at /);

    // A written message is answered in writing only (when-spoken-to).
    upstream.responder = () => openaiText('Written back.');
    api.message(TOKEN, { chat: chatOf(ann), from: ann, text: 'and now?' });
    expect(await replyFor(ann.id, 1, /Written back/)).to.equal('Written back.');
    await sleep(1000);
    expect(api.sent(ann.id, ['sendVoice']), 'no voice note for a written message').to.have.length(1);
    // The note was heard once; the answers were spoken once.
    expect(await voiceCalls()).to.equal(2);
  });

  it('a note too long, one without words and one that is not audio are each answered with why, and the agent is not run for them', async () => {
    const bea = person();
    await set('channels.telegram.allowFrom', [String(bea.id)]);
    upstream.responder = () => openaiText('should not be asked');

    sendVoice(bea, tone(9));
    expect(await replyFor(bea.id, 0)).to.equal('Sorry, I could not listen to your voice note: it is longer than 6 seconds, the longest I listen to; please send a shorter one, or write.');
    sendVoice(bea, Buffer.from('OggS but not really a voice note at all'.repeat(40)));
    expect(await replyFor(bea.id, 1)).to.equal('Sorry, I could not listen to your voice note: its sound could not be read; please record it again, or write.');
    sendVoice(bea, tone(2));
    expect(await replyFor(bea.id, 2)).to.equal('Sorry, I could not listen to your voice note: I heard no words in it; please record it again, or write.');
    expect(upstream.requests, 'the agent was not run for audio it could not hear').to.have.length(0);

    // The operator reads the detail in the session.
    const shown = await json(['sessions', 'show', `telegram:default:dm:${bea.id}`]);
    const notes = shown.messages.filter((message: any) => message.direction === 'in').map((message: any) => message.data.attachments[0]);
    expect(notes.map((note: any) => note.unheard)).to.deep.equal(['audio_too_long', 'bad_audio', 'no_words']);
    expect(notes[0].note).to.equal('not transcribed: The audio is longer than 6 s (voice.maxSeconds).');

    // With words besides (a caption), the agent still reads them, and the person still hears why the audio was not heard.
    upstream.responder = () => openaiText('Read your caption.');
    sendVoice(bea, tone(9), { caption: 'see the note' });
    expect(await replyFor(bea.id, 3)).to.match(/longer than 6 seconds/);
    expect(await replyFor(bea.id, 4)).to.equal('Read your caption.');
    expect(flat(upstream.requests.at(-1)!.body.messages.at(-1).content)).to.match(/^see the note\n\[voice note voice\.ogg \(audio\/ogg, \d+ KB\): not transcribed: The audio is longer than 6 s/);
  });

  it('a stranger\'s voice note is not fetched nor transcribed: they get a pairing code, as for text', async () => {
    const cal = person();
    sendVoice(cal, voiceNote('turn off the radio'));
    const code = await replyFor(cal.id, 0, /pairing code is/);
    expect(code).to.match(/gateway pair approve telegram [A-Z2-9]{8}/);
    await sleep(1500);
    expect(texts(cal.id)).to.have.length(1);
    expect(api.requests.filter((request) => request.method === 'getFile' || request.method === 'file'), 'the audio was never fetched').to.deep.equal([]);
    expect(upstream.requests).to.have.length(0);
    expect(await voiceCalls()).to.equal(0);
  });
});

describe('voice notes on Matrix: the same pipeline as on Telegram (e2e, a stand-in homeserver, real pocketsphinx)', function () {
  this.timeout(180_000);
  let hs: Homeserver;
  let home: Home;
  let upstream: ScriptedUpstream;
  let folder: string;
  const people: MatrixPerson[] = [];

  before(() => {
    folder = mkdtempSync(join(tmpdir(), 'voice-notes-grammar-'));
    chmodSync(folder, 0o755);
    writeFileSync(join(folder, 'lights.jsgf'), GRAMMAR, { mode: 0o644 });
  });
  after(() => rmSync(folder, { recursive: true, force: true }));
  afterEach(async () => {
    await Promise.all(people.splice(0).map((someone) => someone.quit()));
    home?.cleanup();
    await hs?.stop();
    await upstream?.stop();
  });

  it('an approved person\'s voice message (m.audio, marked as voice) reaches the agent as their words; the answer comes back in writing', async () => {
    hs = await new Homeserver().start();
    const bot = hs.register('gwbot', 'Gateway Bot');
    upstream = await new ScriptedUpstream().start();
    upstream.responder = () => openaiText('Heating is off.');
    home = new Home({ GATEWAY_PORT: String(await freePort()) });
    await home.set('voice', {
      transcribe: { kind: 'command', command: ['pocketsphinx_continuous', '-infile', '{input}', '-jsgf', join(folder, 'lights.jsgf'), '-logfn', '/dev/null'], paths: [folder] },
    });
    await home.set('models.providers.script', { kind: 'openai-compatible', baseUrl: upstream.url, models: ['m'], retries: { max: 0 } });
    await home.set('agents.helper', { model: 'script/m' });
    const dora = new MatrixPerson(hs, 'dora');
    people.push(dora);
    await home.set('channels.matrix', { enabled: true, homeserver: hs.url, agent: 'helper', allowFrom: [dora.userId], reconnectMaxDelayMs: 2000 });
    expect((await home.run(['secrets', 'set', 'channels.matrix.accessToken'], { input: bot.token })).code).to.equal(0);
    const started = await home.run(['start']);
    expect(started.code, started.stderr).to.equal(0);
    const room = await dora.directChat(bot.userId);
    await waitFor(() => (hs.membership(room, bot.userId) === 'join' ? true : undefined), 20_000, 'the bot to join');

    const note = voiceNote('turn off the heating');
    const url = await dora.upload(note, 'audio/ogg');
    await dora.say(room, 'Voice message', {
      msgtype: 'm.audio', url, info: { mimetype: 'audio/ogg', size: note.length, duration: 2000 },
      'org.matrix.msc1767.audio': { duration: 2000, waveform: [] }, 'org.matrix.msc3245.voice': {},
    });
    await dora.waitFor(room, /^Heating is off\.$/, { from: bot.userId, timeoutMs: 60_000 });
    expect(flat(upstream.requests.at(-1)!.body.messages.at(-1).content)).to.match(/^\[spoken in a voice note, \d s\] turn off the heating$/);
    const sessions = await home.json(['sessions', 'list']);
    const key = sessions.sessions.find((session: any) => session.channel === 'matrix').key;
    const shown = await home.json(['sessions', 'show', key]);
    expect(shown.messages.find((message: any) => message.direction === 'in').data.attachments[0]).to.include({ voice: true, transcript: 'turn off the heating', kept: true });
  });
});

describe('voice notes on Discord: a voice message heard, the answer uploaded as a voice note (e2e, a stand-in of Discord, real engines)', function () {
  this.timeout(180_000);
  let discord: DiscordApi;
  let home: Home;
  let upstream: ScriptedUpstream;
  let folder: string;

  before(() => {
    folder = mkdtempSync(join(tmpdir(), 'voice-notes-grammar-'));
    chmodSync(folder, 0o755);
    writeFileSync(join(folder, 'lights.jsgf'), GRAMMAR, { mode: 0o644 });
  });
  after(() => rmSync(folder, { recursive: true, force: true }));
  afterEach(async () => {
    home?.cleanup();
    await discord?.stop();
    await upstream?.stop();
  });

  it('a voice message (its flag) reaches the agent as words; voiceReplies always answers with the text and an OGG/Opus file', async () => {
    discord = await new DiscordApi().start();
    upstream = await new ScriptedUpstream().start();
    upstream.responder = () => openaiText('Radio is off.');
    home = new Home({ GATEWAY_PORT: String(await freePort()) });
    const eve = { id: nextId(), username: 'eve', global_name: 'Eve' };
    const dm = discord.dmOf(eve);
    await home.set('voice', {
      transcribe: { kind: 'command', command: ['pocketsphinx_continuous', '-infile', '{input}', '-jsgf', join(folder, 'lights.jsgf'), '-logfn', '/dev/null'], paths: [folder] },
      speak: { kind: 'auto', voice: 'en-us' },
    });
    await home.set('models.providers.script', { kind: 'openai-compatible', baseUrl: upstream.url, models: ['m'], retries: { max: 0 } });
    await home.set('agents.helper', { model: 'script/m' });
    await home.set('channels.discord', { enabled: true, apiRoot: discord.apiRoot, agent: 'helper', allowFrom: [eve.id], voiceReplies: 'always', reconnectMaxDelayMs: 2000 });
    expect((await home.run(['secrets', 'set', 'channels.discord.botToken'], { input: discord.token })).code).to.equal(0);
    const started = await home.run(['start']);
    expect(started.code, started.stderr).to.equal(0);
    await waitFor(async () => ((await home.json(['channels', 'status'])).channels.find((c: any) => c.channel === 'discord')?.state === 'connected' ? true : undefined), 20_000, 'the bot to connect');

    const note = voiceNote('turn off the radio');
    discord.message({ author: eve, channel: dm, content: '', flags: 1 << 13, attachments: [discord.attachment(note, 'voice-message.ogg', 'audio/ogg')] });
    const upload = await waitFor(() => discord.sent(dm).find((call) => call.body.files?.length), 60_000, 'a voice note uploaded');
    expect(flat(upstream.requests.at(-1)!.body.messages.at(-1).content)).to.match(/^\[spoken in a voice note, \d s\] turn off the radio$/);
    expect(discord.sent(dm).map((call) => call.body.content ?? null)).to.deep.equal(['Radio is off.', null]);
    const file = upload.body.files[0];
    expect(file).to.include({ name: 'answer.ogg', type: 'audio/ogg' });
    expect(file.data.subarray(0, 4).toString()).to.equal('OggS');
    expect(file.data.includes(Buffer.from('OpusHead'))).to.equal(true);
    expect(upload.body.enforce_nonce, 'posted once whatever the retries').to.equal(true);
  });
});

describe('voice notes on WhatsApp: a voice note heard, answered with a voice note uploaded to Meta (e2e, a stand-in of the Cloud API, real engines)', function () {
  this.timeout(180_000);
  let api: WhatsAppApi;
  let home: Home;
  let upstream: ScriptedUpstream;
  let folder: string;

  before(() => {
    folder = mkdtempSync(join(tmpdir(), 'voice-notes-grammar-'));
    chmodSync(folder, 0o755);
    writeFileSync(join(folder, 'lights.jsgf'), GRAMMAR, { mode: 0o644 });
  });
  after(() => rmSync(folder, { recursive: true, force: true }));
  afterEach(async () => {
    home?.cleanup();
    await api?.stop();
    await upstream?.stop();
  });

  it('when-spoken-to: the answer goes as its text, then as audio uploaded to the media store (OGG/Opus)', async () => {
    api = await new WhatsAppApi().start();
    upstream = await new ScriptedUpstream().start();
    upstream.responder = () => openaiText('The radio is on.');
    const port = await freePort();
    home = new Home({ GATEWAY_PORT: String(port) });
    const fay = '491510000777';
    await home.set('voice', {
      transcribe: { kind: 'command', command: ['pocketsphinx_continuous', '-infile', '{input}', '-jsgf', join(folder, 'lights.jsgf'), '-logfn', '/dev/null'], paths: [folder] },
      speak: { kind: 'auto', voice: 'en-us' },
    });
    await home.set('channels.whatsapp', { enabled: true, agent: 'helper', apiRoot: api.apiRoot, phoneNumberId: api.phoneNumberId, allowFrom: [`+${fay}`], voiceReplies: 'when-spoken-to', reconnectMaxDelayMs: 2000 });
    await home.set('models.providers.script', { kind: 'openai-compatible', baseUrl: upstream.url, models: ['m'], retries: { max: 0 } });
    await home.set('agents.helper', { model: 'script/m' });
    for (const [name, value] of [['accessToken', api.accessToken], ['appSecret', api.appSecret], ['verifyToken', 'verify-voice']] as const) {
      expect((await home.run(['secrets', 'set', `channels.whatsapp.${name}`], { input: value })).code).to.equal(0);
    }
    const started = await home.run(['start']);
    expect(started.code, started.stderr).to.equal(0);
    await waitFor(async () => ((await home.json(['channels', 'status'])).channels.find((c: any) => c.channel === 'whatsapp')?.state === 'connected' ? true : undefined), 20_000, 'the number to be checked');
    api.subscribe(`http://127.0.0.1:${port}/channels/whatsapp/default/webhook`);

    api.message(fay, { audio: api.upload(voiceNote('turn on the radio'), 'audio/ogg; codecs=opus'), voice: true });
    const audio = await waitFor(() => api.sent(fay).find((call) => call.body.type === 'audio'), 60_000, 'a voice note back');
    expect(flat(upstream.requests.at(-1)!.body.messages.at(-1).content)).to.match(/^\[spoken in a voice note, \d s\] turn on the radio$/);
    // The acknowledgement reaction first (once the note is stored), then the answer's text, then its voice note.
    expect(api.sent(fay).map((call) => call.body.type)).to.deep.equal(['reaction', 'text', 'audio']);
    const uploaded = api.mediaOf(String(audio.body.audio.id))!;
    expect(uploaded.mime).to.equal('audio/ogg');
    expect(Buffer.from(uploaded.data).subarray(0, 4).toString()).to.equal('OggS');
    expect(Buffer.from(uploaded.data).includes(Buffer.from('OpusHead'))).to.equal(true);
  });
});
