import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as sdk from '@matrix-org/matrix-sdk-crypto-wasm';
import { freePort, Home, sleep, waitFor } from '../support/cli.ts';
import { EncryptedPerson } from '../support/matrix-crypto.ts';
import { Homeserver } from '../support/matrix-homeserver.ts';
import { openaiText, openaiToolCalls, ScriptedUpstream } from '../support/scripted-upstream.ts';

/**
 * End-to-end encrypted Matrix against the stand-in homeserver: the people's
 * clients encrypt and decrypt with the same crypto library the gateway uses,
 * each a device of its own, so what they read is what the gateway really
 * encrypted for them.
 */
describe('Matrix end-to-end encryption (e2e, a stand-in homeserver, people\'s devices on the Matrix crypto library)', function () {
  this.timeout(180_000);
  let hs: Homeserver;
  let home: Home;
  let upstream: ScriptedUpstream;
  let bot: { userId: string; token: string; deviceId: string };
  const people: EncryptedPerson[] = [];
  let serial = 0;

  const json = (args: string[]) => home.json(args);
  const set = (key: string, value: unknown) => home.set(key, value);
  const account = async () => (await json(['channels', 'status'])).channels.find((c: any) => c.channel === 'matrix') as { state: string; detail?: string };
  const connected = () => waitFor(async () => ((await account())?.state === 'connected' ? true : undefined), 30_000, 'the account to sync');
  const person = async (name: string) => {
    const made = await EncryptedPerson.make(hs, `${name}${++serial}`);
    people.push(made);
    return made;
  };
  /** What the bot put in a room, as the homeserver holds it. */
  const botEvents = (room: string) => hs.events(room).filter((event) => event.sender === bot.userId && (event.type === 'm.room.message' || event.type === 'm.room.encrypted'));
  /** An allowed person in an encrypted direct chat the bot has joined. */
  const allowedChat = async (name: string) => {
    const someone = await person(name);
    await set('channels.matrix.allowFrom', [someone.userId]);
    const room = await someone.directChat(bot.userId, { encrypted: true });
    await waitFor(() => (hs.membership(room, bot.userId) === 'join' ? true : undefined), 30_000, 'the bot to join');
    return { someone, room };
  };

  beforeEach(async () => {
    hs = await new Homeserver().start();
    bot = hs.register('gwbot', 'Gateway Bot');
    upstream = await new ScriptedUpstream().start();
    upstream.responder = (request) => openaiText(`Echo: ${String((request.body.messages as { content: string }[]).at(-1)?.content)}`);
    home = new Home({ GATEWAY_PORT: String(await freePort()) });
    await set('models.providers.script', { kind: 'openai-compatible', baseUrl: upstream.url, models: ['m'], retries: { max: 0 } });
    await set('agents.helper', { model: 'script/m' });
    await set('channels.matrix', { enabled: true, homeserver: hs.url, agent: 'helper', reconnectMaxDelayMs: 2000 });
    const secret = await home.run(['secrets', 'set', 'channels.matrix.accessToken'], { input: bot.token });
    expect(secret.code, secret.stderr).to.equal(0);
    const started = await home.run(['start']);
    expect(started.code, started.stderr).to.equal(0);
    await connected();
  });
  afterEach(async () => {
    await Promise.all(people.splice(0).map((someone) => someone.quit()));
    home.cleanup();
    await hs.stop();
    await upstream.stop();
  });

  it('a stranger\'s encrypted direct chat waits for approval; approved, the bot reads the encrypted question and answers encrypted, as a device whose keys it uploaded', async () => {
    expect(hs.deviceKeys.get(bot.userId)?.has(bot.deviceId), 'the bot\'s device keys are uploaded at start').to.equal(true);
    const alice = await person('alice');
    const room = await alice.directChat(bot.userId, { encrypted: true });
    const request = await waitFor(async () => (await json(['pair', 'list', 'matrix'])).requests[0], 30_000, 'a pairing request');
    expect(request).to.include({ channel: 'matrix', sender: alice.userId });
    expect(hs.membership(room, bot.userId), 'a stranger\'s invite is left pending').to.equal('invite');

    expect(await json(['pair', 'approve', 'matrix', request.code, '--notify'])).to.include({ approved: true, notified: true });
    expect(hs.membership(room, bot.userId)).to.equal('join');
    const approved = await alice.waitFor(room, /approved/, { from: bot.userId });
    expect(approved.decrypted, 'even the approval notice is encrypted').to.include({ senderDevice: bot.deviceId });

    const seen = alice.received.length;
    await alice.sayEncrypted(room, 'What is Matrix?');
    const answer = await alice.waitFor(room, /^Echo: What is Matrix\?$/, { after: seen, from: bot.userId, timeoutMs: 30_000 });
    expect(answer.decrypted).to.include({ senderDevice: bot.deviceId });
    expect(botEvents(room).map((event) => event.type), 'nothing the bot said in the room is in the clear').to.not.include('m.room.message');
    expect(JSON.stringify(hs.events(room)), 'the homeserver never sees the words').to.not.include('What is Matrix');
    expect(alice.undecrypted).to.deep.equal([]);
    const botCalls = hs.calls.filter((call) => call.user === bot.userId).map((call) => call.path);
    expect(botCalls.some((path) => path.endsWith('/keys/query'))).to.equal(true);
    expect(botCalls.some((path) => path.endsWith('/keys/claim'))).to.equal(true);
    expect(botCalls.some((path) => path.includes('/sendToDevice/m.room.encrypted/'))).to.equal(true);

    // A file sent encrypted is fetched and decrypted for the agent.
    upstream.responder = () => openaiText('Noted.');
    await alice.sendEncryptedFile(room, 'stock.csv', Buffer.from('name,count\nbolts,4\n'), 'text/csv');
    await alice.waitFor(room, /^Noted\.$/, { from: bot.userId, timeoutMs: 30_000 });
    expect(String(upstream.requests.at(-1)!.body.messages.at(-1).content)).to.include('Content of stock.csv:\nname,count\nbolts,4');

    const session = await json(['sessions', 'show', `matrix:default:dm:${alice.userId}`]);
    expect(session.messages.map((m: any) => m.text)).to.include.members(['What is Matrix?', 'Echo: What is Matrix?']);
    expect(session.messages.at(-1).delivery).to.include({ status: 'sent', to: room });

    // The store's passphrase is a secret of its own, never in the state, the logs or the config.
    const passphrase = home.secrets()['channels.matrix.cryptoKey'];
    expect(passphrase, 'a passphrase was made and kept in the secret store').to.be.a('string').with.length.above(30);
    expect((await json(['secrets', 'list'])).secrets.map((s: any) => s.name ?? s)).to.include('channels.matrix.cryptoKey');
    expect(home.stateText()).to.not.include(passphrase!);
    expect((await home.run(['logs', '-n', '5000', '--raw'])).stdout).to.not.include(passphrase!);
    expect((await home.run(['config', 'get', 'channels.matrix', '--json'])).stdout).to.not.include(passphrase!);
  });

  it('an encrypted room: a mention is read and answered, encrypted for every member\'s device; a line not for it is kept, not answered', async () => {
    const carol = await person('carol');
    const dan = await person('dan');
    await set('channels.matrix.allowFrom', [carol.userId, dan.userId]);
    const made = await carol.api<{ room_id: string }>('POST', '/client/v3/createRoom', {
      invite: [bot.userId, dan.userId], preset: 'private_chat', room_alias_name: `team${serial}`,
      initial_state: [{ type: 'm.room.encryption', state_key: '', content: { algorithm: 'm.megolm.v1.aes-sha2' } }],
    });
    const team = made.body.room_id;
    await set('channels.matrix.rooms', [team]);
    await dan.join(team);
    await waitFor(() => (hs.membership(team, bot.userId) === 'join' ? true : undefined), 30_000, 'the bot to join the room');
    await sleep(500);
    const seen = dan.received.length;
    await carol.sayEncrypted(team, 'just chatting among ourselves');
    await carol.sayEncrypted(team, 'Gateway Bot: what time is it?');
    const answer = await dan.waitFor(team, /what time is it\?$/, { after: seen, from: bot.userId, timeoutMs: 30_000 });
    expect(answer.content.body).to.equal(`Echo: ${carol.userId}: what time is it?`);
    expect(answer.decrypted, 'Dan\'s device was given the key too').to.include({ senderDevice: bot.deviceId });
    await carol.waitFor(team, /what time is it\?$/, { from: bot.userId });
    await sleep(1000);
    expect(dan.messagesFrom(team, bot.userId), 'only the mention is answered').to.have.length(1);
    const kept = await json(['sessions', 'show', `matrix:default:group:${team}`]);
    expect(kept.messages.map((m: any) => m.text)).to.include('just chatting among ourselves');
  });

  it('sends a workspace file into an encrypted chat encrypted (AES-256-CTR, its key only in the Megolm-encrypted event): the person decrypts it to the exact bytes', async () => {
    await set('agents.helper.tools', ['message.attach']);
    const { someone: kim, room } = await allowedChat('kim');
    await kim.sayEncrypted(room, 'hi');
    await kim.waitFor(room, /^Echo: hi$/, { from: bot.userId, timeoutMs: 30_000 });
    const workspace = join(home.profileDir(), 'workspaces', 'helper');
    mkdirSync(workspace, { recursive: true });
    const png = Buffer.from('89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082', 'hex');
    writeFileSync(join(workspace, 'pixel.png'), png);
    const report = Buffer.from('the secret quarterly figures: 42\n');
    writeFileSync(join(workspace, 'figures.txt'), report);

    const sent = await json(['message', 'send', '--channel', 'matrix', '--to', kim.userId, '--file', 'pixel.png', 'a pixel']);
    expect(sent.delivery).to.include({ kind: 'file', status: 'sent' });
    upstream.enqueue(openaiToolCalls([{ name: 'message.attach', args: { path: 'figures.txt', caption: 'the figures' } }]), openaiText('Here they are.'));
    await kim.sayEncrypted(room, 'send me the figures');
    await kim.waitFor(room, /^Here they are\.$/, { from: bot.userId, timeoutMs: 30_000 });

    /** What the person's client does with an encrypted file: fetch the ciphertext, check its hash, decrypt it with the event's key. */
    const opened = async (event: Record<string, any>) => {
      expect(event.decrypted, 'the event came encrypted from the bot\'s device').to.include({ senderDevice: bot.deviceId });
      const file = event.content.file;
      expect(event.content.url, 'no address in the clear beside the encrypted file').to.equal(undefined);
      expect(file).to.include({ v: 'v2' });
      expect(file.key).to.deep.equal({ kty: 'oct', key_ops: ['encrypt', 'decrypt'], alg: 'A256CTR', k: file.key.k, ext: true });
      expect(Buffer.from(file.key.k, 'base64url')).to.have.length(32);
      const iv = Buffer.from(file.iv, 'base64');
      expect(iv).to.have.length(16);
      expect(iv.subarray(8).equals(Buffer.alloc(8)), 'the counter half of the IV starts at zero').to.equal(true);
      const ciphertext = await kim.download(file.url);
      expect(createHash('sha256').update(ciphertext).digest('base64').replace(/=+$/, '')).to.equal(file.hashes.sha256);
      const stored = hs.mediaOf(file.url)!;
      expect(stored.type, 'the homeserver is told nothing of the file').to.equal('application/octet-stream');
      expect(stored.filename).to.equal(undefined);
      return { ciphertext, clear: Buffer.from(sdk.Attachment.decrypt(new sdk.EncryptedAttachment(new Uint8Array(ciphertext), JSON.stringify({ v: file.v, key: file.key, iv: file.iv, hashes: file.hashes })))) };
    };
    const image = await kim.waitFor(room, /^a pixel$/, { from: bot.userId, timeoutMs: 30_000 });
    expect(image.content).to.include({ msgtype: 'm.image', filename: 'pixel.png' });
    expect(image.content.info).to.deep.equal({ mimetype: 'image/png', size: png.length });
    const pixel = await opened(image);
    expect(pixel.clear.equals(png)).to.equal(true);
    expect(pixel.ciphertext.equals(png), 'the homeserver holds only ciphertext').to.equal(false);
    const attached = await kim.waitFor(room, /^the figures$/, { from: bot.userId, timeoutMs: 30_000 });
    expect(attached.content).to.include({ msgtype: 'm.file', filename: 'figures.txt' });
    expect((await opened(attached)).clear.equals(report)).to.equal(true);
    expect(botEvents(room).map((event) => event.type), 'nothing the bot put in the room is in the clear').to.not.include('m.room.message');
    expect(JSON.stringify(hs.events(room))).to.not.include('figures.txt').and.not.include('quarterly');
    expect(kim.undecrypted).to.deep.equal([]);
  });

  it('keeps its device across restarts: the same device id and keys, no new device keys uploaded, and keys people shared before still decrypt', async () => {
    const { someone: erin, room } = await allowedChat('erin');
    await erin.sayEncrypted(room, 'before the restart');
    await erin.waitFor(room, /^Echo: before the restart$/, { from: bot.userId, timeoutMs: 30_000 });
    const keys = JSON.stringify(hs.deviceKeys.get(bot.userId)?.get(bot.deviceId));
    const shares = hs.calls.filter((call) => call.user === erin.userId && call.path.includes('/sendToDevice/')).length;
    const uploads = () => hs.calls.filter((call) => call.user === bot.userId && call.path.endsWith('/keys/upload') && call.body.device_keys).length;
    const uploadedBefore = uploads();

    expect((await home.run(['restart'])).code).to.equal(0);
    await connected();
    expect([...(hs.deviceKeys.get(bot.userId)?.keys() ?? [])], 'one device, the same').to.deep.equal([bot.deviceId]);
    expect(JSON.stringify(hs.deviceKeys.get(bot.userId)?.get(bot.deviceId)), 'the same identity keys').to.equal(keys);
    expect(uploads(), 'no new device keys').to.equal(uploadedBefore);

    const seen = erin.received.length;
    await erin.sayEncrypted(room, 'after the restart');
    await erin.waitFor(room, /^Echo: after the restart$/, { after: seen, from: bot.userId, timeoutMs: 30_000 });
    expect(hs.calls.filter((call) => call.user === erin.userId && call.path.includes('/sendToDevice/')).length, 'the room key Erin shared before is still the bot\'s: nothing shared again').to.equal(shares);
    expect(erin.undecrypted).to.deep.equal([]);

    // Stopped and started again with the same store: still the same device.
    expect((await home.run(['stop'])).code).to.equal(0);
    expect((await home.run(['start'])).code).to.equal(0);
    await connected();
    await erin.sayEncrypted(room, 'after a stop');
    await erin.waitFor(room, /^Echo: after a stop$/, { from: bot.userId, timeoutMs: 30_000 });
    expect([...(hs.deviceKeys.get(bot.userId)?.keys() ?? [])]).to.deep.equal([bot.deviceId]);
  });

  it('a message whose key has not come says so in the account\'s state; when the key comes, it is read and answered', async () => {
    const { someone: fay, room } = await allowedChat('fay');
    // A broken encrypted event (no ciphertext) is let go: it will never be read, and says nothing in the state.
    const broken = await fay.api('PUT', `/client/v3/rooms/${encodeURIComponent(room)}/send/m.room.encrypted/broken1`, { algorithm: 'm.megolm.v1.aes-sha2', session_id: 'x' });
    expect(broken.status).to.equal(200);
    await fay.sayEncrypted(room, 'a key that comes late', { shareKeys: false });
    const waiting = await waitFor(async () => {
      const status = await account();
      return /cannot be read yet/.test(status.detail ?? '') ? status : undefined;
    }, 30_000, 'the account to say a message cannot be read');
    expect(waiting.state).to.equal('connected');
    expect(waiting.detail).to.include(room).and.to.match(/^@gwbot\d*:example\.test; 1 encrypted message cannot be read yet: the sender's device has not shared the room key with this device/);
    expect(upstream.requests, 'nothing undecrypted reaches the agent').to.have.length(0);

    // Kept across a restart while it waits.
    expect((await home.run(['restart'])).code).to.equal(0);
    await waitFor(async () => (/cannot be read yet/.test((await account()).detail ?? '') ? true : undefined), 30_000, 'the state to say so after a restart');

    await fay.releaseKeys();
    await fay.waitFor(room, /^Echo: a key that comes late$/, { from: bot.userId, timeoutMs: 30_000 });
    await waitFor(async () => (((await account()).detail ?? '').includes('cannot be read') ? undefined : true), 30_000, 'the state to clear');
    expect((await account()).detail).to.equal(bot.userId);
  });

  it('kill -9 with an encrypted message waiting for its answer: after a restart it is answered exactly once, and one sent meanwhile too', async () => {
    const { someone: gus, room } = await allowedChat('gus');
    upstream.responder = (request) => ({ ...openaiText(`Answer: ${String(request.body.messages.at(-1).content)}`), delayMs: 1500 });
    await gus.sayEncrypted(room, 'question one');
    await waitFor(() => (upstream.requests.some((r) => JSON.stringify(r.body).includes('question one')) ? true : undefined), 30_000, 'the run to ask its model');
    process.kill(home.lock().pid, 'SIGKILL');
    await gus.sayEncrypted(room, 'question two');
    const started = await home.run(['start']);
    expect(started.code, started.stderr).to.equal(0);
    await gus.waitFor(room, /^Answer: question one$/, { from: bot.userId, timeoutMs: 60_000 });
    await gus.waitFor(room, /^Answer: question two$/, { from: bot.userId, timeoutMs: 60_000 });
    await sleep(2500);
    const answers = gus.messagesFrom(room, bot.userId).filter((text) => text.startsWith('Answer:'));
    expect(answers.sort()).to.deep.equal(['Answer: question one', 'Answer: question two']);
    const session = await json(['sessions', 'show', `matrix:default:dm:${gus.userId}`]);
    expect(session.messages.filter((m: any) => m.direction === 'in').map((m: any) => m.text), 'each stored once').to.deep.equal(['question one', 'question two']);
    expect(gus.undecrypted).to.deep.equal([]);
  });

  it('kill -9 just after a room key went out, before the homeserver answered: the restarted device goes on from the keys it sent, and the person reads every answer', async () => {
    const { someone: jo, room } = await allowedChat('jo');
    // The homeserver delivers the bot's first encrypted to-device message (the room key for jo) but never answers it.
    hs.fault(/\/sendToDevice\/m\.room\.encrypted\//, { silent: true }, bot.userId);
    upstream.responder = (request) => openaiText(`Answer: ${String(request.body.messages.at(-1).content)}`);
    await jo.sayEncrypted(room, 'question one');
    await waitFor(() => (hs.silenced.length ? true : undefined), 30_000, 'the room key to go out');
    process.kill(home.lock().pid, 'SIGKILL');
    const started = await home.run(['start']);
    expect(started.code, started.stderr).to.equal(0);
    await jo.waitFor(room, /^Answer: question one$/, { from: bot.userId, timeoutMs: 60_000 });
    await jo.sayEncrypted(room, 'question two');
    await jo.waitFor(room, /^Answer: question two$/, { from: bot.userId, timeoutMs: 60_000 });
    expect(jo.undecrypted.map((event) => event.error)).to.deep.equal([]);
  });

  it('with encryption off, an encrypted invite is declined with the reason; a passphrase that does not open the kept keys puts the account in error with the fix', async () => {
    const { someone: hal, room } = await allowedChat('hal');
    await hal.sayEncrypted(room, 'hello');
    await hal.waitFor(room, /^Echo: hello$/, { from: bot.userId, timeoutMs: 30_000 });

    const secret = await home.run(['secrets', 'set', 'channels.matrix.cryptoKey'], { input: 'not-the-passphrase-the-keys-were-locked-with' });
    expect(secret.code, secret.stderr).to.equal(0);
    expect((await home.run(['restart'])).code).to.equal(0);
    const refused = await waitFor(async () => ((await account())?.state === 'error' ? await account() : undefined), 30_000, 'the account to refuse');
    expect(refused.detail).to.match(/cannot be unlocked with the secret channels\.matrix\.cryptoKey/);
    expect(JSON.stringify(refused)).to.not.include('not-the-passphrase');

    await set('channels.matrix.encryption', false);
    expect((await home.run(['restart'])).code).to.equal(0);
    await connected();
    const ivy = await person('ivy');
    await set('channels.matrix.allowFrom', [hal.userId, ivy.userId]);
    const secretRoom = await ivy.directChat(bot.userId, { encrypted: true });
    await waitFor(() => (hs.membership(secretRoom, bot.userId) === 'leave' ? true : undefined), 30_000, 'the invite to be declined');
    const left = hs.events(secretRoom).find((event) => event.type === 'm.room.member' && event.state_key === bot.userId && event.content.membership === 'leave');
    expect(left!.content.reason).to.match(/cannot read end-to-end encrypted rooms \(its encryption is turned off\)/);
  });
});
