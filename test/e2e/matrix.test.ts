import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, Home, sleep, waitFor } from '../support/cli.ts';
import { Homeserver, MatrixPerson } from '../support/matrix-homeserver.ts';
import { openaiText, ScriptedUpstream } from '../support/scripted-upstream.ts';

/** The gateway's Matrix client against a stand-in homeserver of the client-server API: what people's clients receive is asserted. */
describe('Matrix channel (e2e, a stand-in homeserver of the client-server API)', function () {
  this.timeout(120_000);
  let hs: Homeserver;
  let home: Home;
  let upstream: ScriptedUpstream;
  let bot: { userId: string; token: string };
  let lobby: string;
  const people: MatrixPerson[] = [];
  let allowed: string[] = [];
  let serial = 0;

  const json = (args: string[]) => home.json(args);
  const set = (key: string, value: unknown) => home.set(key, value);
  const account = async () => (await json(['channels', 'status'])).channels.find((c: any) => c.channel === 'matrix') as { state: string; detail?: string };
  const connected = () => waitFor(async () => ((await account())?.state === 'connected' ? true : undefined), 20_000, 'the account to sync');
  const person = (name: string) => {
    const made = new MatrixPerson(hs, `${name}${++serial}`);
    people.push(made);
    return made;
  };
  /** A person the gateway lets in (allowFrom), in a direct chat the bot has joined. */
  const allowedChat = async (name: string) => {
    const someone = person(name);
    allowed.push(someone.userId);
    await set('channels.matrix.allowFrom', allowed);
    const room = await someone.directChat(bot.userId);
    await waitFor(() => (hs.membership(room, bot.userId) === 'join' ? true : undefined), 20_000, 'the bot to join');
    return { someone, room };
  };

  beforeEach(async () => {
    allowed = [];
    hs = await new Homeserver().start();
    bot = hs.register('gwbot', 'Gateway Bot');
    const owner = hs.register('owner');
    lobby = hs.createRoom(owner.userId, { public: true, alias: `lobby${serial}` });
    upstream = await new ScriptedUpstream().start();
    upstream.responder = (request) => openaiText(`Echo: ${String((request.body.messages as { content: string }[]).at(-1)?.content)}`);
    home = new Home({ GATEWAY_PORT: String(await freePort()) });
    await set('models.providers.script', { kind: 'openai-compatible', baseUrl: upstream.url, models: ['m'], retries: { max: 0 } });
    await set('agents.helper', { model: 'script/m' });
    await set('channels.matrix', { enabled: true, homeserver: hs.url, agent: 'helper', rooms: [`#lobby${serial}:${hs.server}`], reconnectMaxDelayMs: 2000 });
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

  it('a stranger\'s invite waits with a pairing request; approved, the bot joins and says so, and the agent answers with typing shown; the token is only in the secret store', async () => {
    expect(await account()).to.include({ state: 'connected', detail: bot.userId });
    const alice = person('alice');
    const room = await alice.directChat(bot.userId);
    const request = await waitFor(async () => (await json(['pair', 'list', 'matrix'])).requests[0], 20_000, 'a pairing request');
    expect(request).to.include({ channel: 'matrix', account: 'default', sender: alice.userId });
    await sleep(1000);
    expect(hs.membership(room, bot.userId), 'a stranger\'s invite is left pending').to.equal('invite');
    expect(alice.received.filter((event) => event.sender === bot.userId)).to.deep.equal([]);

    expect(await json(['pair', 'approve', 'matrix', request.code, '--notify'])).to.include({ approved: true, notified: true });
    expect(hs.membership(room, bot.userId)).to.equal('join');
    await alice.waitFor(room, /approved/, { from: bot.userId });
    const seen = alice.received.length;
    await alice.say(room, 'What is Matrix?');
    const answer = await alice.waitFor(room, /^Echo: What is Matrix\?$/, { after: seen, from: bot.userId });
    expect(answer.content.msgtype).to.equal('m.text');
    expect(answer.content['m.mentions'], 'replies mention nobody').to.deep.equal({});
    expect(hs.typing.some((entry) => entry.room === room && entry.user === bot.userId && entry.typing)).to.equal(true);
    const session = await json(['sessions', 'show', `matrix:default:dm:${alice.userId}`]);
    expect(session.messages.map((m: any) => m.text)).to.include.members(['What is Matrix?', 'Echo: What is Matrix?']);
    expect(session.messages.at(-1).delivery).to.include({ status: 'sent', to: room });
    expect(session.messages.at(-1).delivery.receipts[0]).to.match(/^\$/);
    expect(hs.accountData.get(bot.userId)?.get('m.direct'), 'the direct room is noted as clients do').to.deep.equal({ [alice.userId]: [room] });

    // After a restart, the operator's message to the person goes to the same room, not a new one.
    expect((await home.run(['restart'])).code).to.equal(0);
    await connected();
    const sent = await home.run(['message', 'send', '--channel', 'matrix', '--to', alice.userId, 'A word from the operator.']);
    expect(sent.code, sent.stderr).to.equal(0);
    await alice.waitFor(room, /^A word from the operator\.$/, { from: bot.userId });
    expect(hs.calls.filter((call) => call.user === bot.userId && call.path.endsWith('/createRoom'))).to.deep.equal([]);
    expect((await home.run(['config', 'get', 'channels.matrix', '--json'])).stdout).to.not.include(bot.token);
    expect((await home.run(['logs', '-n', '5000', '--raw'])).stdout).to.not.include(bot.token);
  });

  it('an allowed sender\'s invite is joined at once; a room is answered only when the bot is mentioned, never a notice or its own echo', async () => {
    const { someone: bob, room } = await allowedChat('bob');
    await bob.say(room, 'hi there');
    await bob.waitFor(room, /^Echo: hi there$/, { from: bot.userId });

    // A group room Bob invites the bot to: joined (Bob may talk), but not his direct room, and not answered (not in rooms).
    const team = person('team');
    const made = await bob.api<{ room_id: string }>('POST', '/client/v3/createRoom', { invite: [bot.userId, team.userId], preset: 'private_chat' });
    const side = made.body.room_id;
    await team.join(side);
    await waitFor(() => (hs.membership(side, bot.userId) === 'join' ? true : undefined), 20_000, 'the bot to join the group room');
    expect(hs.accountData.get(bot.userId)?.get('m.direct')).to.deep.equal({ [bob.userId]: [room] });
    await bob.say(side, 'Gateway Bot: are you here?');

    await waitFor(() => (hs.membership(lobby, bot.userId) === 'join' ? true : undefined), 10_000, 'the bot in its configured room');
    const carol = person('carol');
    const dan = person('dan');
    await carol.join(lobby);
    await dan.join(lobby);
    const seen = carol.received.length;
    await carol.say(lobby, 'just chatting among ourselves');
    await dan.say(lobby, 'a bot\'s notice is not a question', { msgtype: 'm.notice' });
    await carol.say(lobby, 'Gateway Bot: what time is it?');
    await dan.say(lobby, 'and the weather?', { 'm.mentions': { user_ids: [bot.userId] } });
    await carol.waitFor(lobby, /what time is it\?$/, { after: seen, from: bot.userId });
    await carol.waitFor(lobby, /and the weather\?$/, { after: seen, from: bot.userId });
    await sleep(1500);
    const answers = carol.messagesFrom(lobby, bot.userId);
    expect(answers, 'only the two mentions are answered').to.have.length(2);
    expect(bob.messagesFrom(side, bot.userId), 'a room not in rooms is not answered').to.deep.equal([]);
    expect(answers.find((text) => text.includes('what time'))).to.equal(`Echo: ${carol.userId}: what time is it?`);
    const sessions = (await json(['sessions', 'list'])).sessions as any[];
    expect(sessions.map((s) => s.key)).to.include(`matrix:default:group:${lobby}`);
    const kept = await json(['sessions', 'show', `matrix:default:group:${lobby}`]);
    expect(kept.messages.map((m: any) => m.text)).to.include('just chatting among ourselves');
  });

  it('keeps its sync token only after what it covers is stored: a restart, a cut connection, a homeserver away and a rate limit lose nothing and answer once', async () => {
    const { someone: erin, room } = await allowedChat('erin');
    expect((await home.run(['stop'])).code).to.equal(0);
    await erin.say(room, 'first while away');
    await erin.say(room, 'second while away');
    expect((await home.run(['start'])).code).to.equal(0);
    await erin.waitFor(room, /^Echo: first while away$/, { from: bot.userId, timeoutMs: 20_000 });
    await erin.waitFor(room, /^Echo: second while away$/, { from: bot.userId, timeoutMs: 20_000 });

    // A sync answer cut halfway: the account says why, tries again, and reads from the same place.
    hs.fault(/\/sync$/, { cut: true }, bot.userId);
    await erin.say(room, 'after the cut');
    await erin.waitFor(room, /^Echo: after the cut$/, { from: bot.userId, timeoutMs: 20_000 });
    const warned = (await home.run(['logs', '-n', '5000', '--raw'])).stdout.split('\n').filter((line) => line.includes('matrix account not syncing'));
    expect(warned.length, 'the cut is a warning with its reason').to.be.at.least(1);
    expect(JSON.parse(warned[0]!)).to.include({ level: 40 });

    // The homeserver goes away while a reply is written; the reply waits, and goes once it is back.
    upstream.enqueue({ ...openaiText('Delivered after the outage.'), delayMs: 2000 });
    await erin.say(room, 'slow question');
    await waitFor(() => (upstream.requests.some((r) => JSON.stringify(r.body).includes('slow question')) ? true : undefined), 10_000, 'the run to ask its model');
    await hs.halt();
    await waitFor(async () => ((await account()).state !== 'connected' ? true : undefined), 20_000, 'the account to notice');
    expect((await account()).detail).to.match(/cannot reach the homeserver/);
    await sleep(2500);
    await hs.resume();
    await connected();
    await erin.waitFor(room, /^Delivered after the outage\.$/, { from: bot.userId, timeoutMs: 30_000 });

    // A homeserver that no longer knows the stored sync token: the account starts again from now, and goes on answering.
    hs.fault(/\/sync$/, { status: 400, body: { errcode: 'M_INVALID_PARAM', error: 'Invalid stream token' } }, bot.userId);
    await erin.say(room, 'nudge');
    await waitFor(() => (readFileSync(home.file('gateway.log'), 'utf8').includes('does not know the stored sync token') ? true : undefined), 20_000, 'the account to start again');
    await connected();
    await erin.say(room, 'after a forgotten token');
    await erin.waitFor(room, /^Echo: after a forgotten token$/, { from: bot.userId, timeoutMs: 20_000 });

    // A rate limit on send: the reply waits as the homeserver asks, then goes once.
    hs.fault(/\/send\//, { status: 429, body: { errcode: 'M_LIMIT_EXCEEDED', error: 'Too many requests', retry_after_ms: 700 } }, bot.userId);
    await erin.say(room, 'limited');
    await erin.waitFor(room, /^Echo: limited$/, { from: bot.userId, timeoutMs: 20_000 });
    await sleep(1500);
    const answers = erin.messagesFrom(room, bot.userId);
    for (const text of ['Echo: first while away', 'Echo: second while away', 'Echo: after the cut', 'Delivered after the outage.', 'Echo: limited']) {
      expect(answers.filter((answer) => answer === text), text).to.have.length(1);
    }
    const shown = await json(['sessions', 'show', `matrix:default:dm:${erin.userId}`]);
    expect(shown.messages.filter((m: any) => m.direction === 'in' && m.text === 'first while away')).to.have.length(1);
  });

  it('with streaming on, the reply grows in one message through edits (m.replace) and ends holding all of it', async () => {
    const { someone: kim, room } = await allowedChat('kim');
    await set('channels.matrix.streaming', true);
    const answer = Array.from({ length: 10 }, (_, index) => `Line ${index + 1} of the answer.`).join(' ');
    upstream.enqueue(openaiText(answer, undefined, { pieces: 10, gapMs: 300 }));
    await kim.say(room, 'go on');
    const edits = () => kim.received.filter((event) => event.room_id === room && event.sender === bot.userId && event.content?.['m.relates_to']?.rel_type === 'm.replace');
    await waitFor(() => (edits().some((event) => event.content['m.new_content']?.body === answer) ? true : undefined), 30_000, 'the whole answer in the message');
    const first = kim.received.filter((event) => event.room_id === room && event.sender === bot.userId && event.type === 'm.room.message' && !event.content?.['m.relates_to']);
    expect(first, 'one message, then edits of it').to.have.length(1);
    expect(edits().length).to.be.at.least(2);
    expect(edits().every((event) => event.content['m.relates_to'].event_id === first[0]!.event_id)).to.equal(true);
    expect(edits().every((event) => answer.startsWith(String(event.content['m.new_content'].body)))).to.equal(true);
  });

  it('reads back what a busy room said while it was away, past what one sync holds: the oldest mention is answered, every line kept', async () => {
    await waitFor(() => (hs.membership(lobby, bot.userId) === 'join' ? true : undefined), 10_000, 'the bot in its configured room');
    const ivy = person('ivy');
    await ivy.join(lobby);
    expect((await home.run(['stop'])).code).to.equal(0);
    await ivy.say(lobby, 'gwbot: the first thing said while you were away?');
    for (let line = 0; line < 150; line++) await ivy.say(lobby, `chatter ${line}`);
    expect((await home.run(['start'])).code).to.equal(0);
    await ivy.waitFor(lobby, /the first thing said while you were away\?$/, { from: bot.userId, timeoutMs: 30_000 });
    const kept = await waitFor(async () => {
      const shown = await json(['sessions', 'show', `matrix:default:group:${lobby}`, '--limit', '500']);
      return shown.messages.filter((m: any) => m.direction === 'in').length >= 151 ? shown : undefined;
    }, 20_000, 'every line to be kept');
    const lines = kept.messages.filter((m: any) => m.direction === 'in').map((m: any) => m.text);
    expect(lines.filter((text: string) => text.startsWith('chatter '))).to.have.length(150);
    expect(new Set(lines).size, 'each once').to.equal(lines.length);
    expect(hs.calls.some((call) => call.user === bot.userId && call.path.endsWith('/messages')), 'read back with /messages').to.equal(true);
  });

  it('with encryption off, refuses encrypted rooms with the reason: an invite is declined, an encrypted message is answered with a notice once', async () => {
    await set('channels.matrix.encryption', false);
    expect((await home.run(['restart'])).code).to.equal(0);
    await connected();
    const fay = person('fay');
    allowed.push(fay.userId);
    await set('channels.matrix.allowFrom', allowed);
    const secret = await fay.directChat(bot.userId, { encrypted: true });
    await waitFor(() => (hs.membership(secret, bot.userId) === 'leave' ? true : undefined), 20_000, 'the invite to be declined');
    const left = hs.events(secret).find((event) => event.type === 'm.room.member' && event.state_key === bot.userId && event.content.membership === 'leave');
    expect(left!.content.reason).to.match(/cannot read end-to-end encrypted rooms/);

    const { room } = await allowedChat('gus').then(async ({ someone, room: chat }) => ({ someone, room: chat }));
    const gus = people.at(-1)!;
    hs.encrypt(room, gus.userId);
    const seen = gus.received.length;
    for (let i = 0; i < 2; i++) {
      await gus.api('PUT', `/client/v3/rooms/${encodeURIComponent(room)}/send/m.room.encrypted/e${i}${Date.now()}`, { algorithm: 'm.megolm.v1.aes-sha2', ciphertext: 'AwgAEn...', session_id: 's', device_id: 'D' });
    }
    const notice = await gus.waitFor(room, /end-to-end encrypted/, { after: seen, from: bot.userId });
    expect(notice.content.msgtype).to.equal('m.notice');
    await sleep(1500);
    expect(gus.messagesFrom(room, bot.userId).filter((text) => /encrypted/.test(text)), 'told once').to.have.length(1);
    expect(upstream.requests, 'nothing encrypted reaches the agent').to.have.length(0);
  });

  it('takes malformed and hostile events without stopping, reads a file sent to it, and a refused token puts the account in error with the reason', async () => {
    const { someone: hal, room } = await allowedChat('hal');
    const base = { type: 'm.room.message', sender: hal.userId, room_id: room, origin_server_ts: Date.now() };
    let n = 0;
    const id = () => `$bad${++n}`;
    for (const event of [
      null, 'a string', 42, [], {}, { ...base }, { ...base, event_id: id() }, { ...base, event_id: id(), content: null },
      { ...base, event_id: id(), content: { msgtype: 'm.text', body: 42 } }, { ...base, event_id: id(), content: { msgtype: 'm.text', body: '   ' } },
      { ...base, event_id: id(), sender: 'not-a-user', content: { msgtype: 'm.text', body: 'who?' } },
      { ...base, event_id: id(), content: { msgtype: 'm.image', body: 'x.png', url: 'https://192.0.2.1/x.png' } },
      { ...base, event_id: id(), content: { msgtype: 'm.text', body: 'an edit', 'm.relates_to': { rel_type: 'm.replace', event_id: '$x' } } },
      { ...base, event_id: id(), origin_server_ts: 'soon', content: { msgtype: 'm.text', body: 'y'.repeat(50_000) } },
      { ...base, type: 'm.room.member', event_id: id(), state_key: 42, content: 'nothing' },
      { ...base, event_id: id(), content: { msgtype: 'm.text', body: '> <@x:example.test> quoted\n\nthe reply', 'm.relates_to': { 'm.in_reply_to': { event_id: '$q' } } } },
    ]) hs.inject(room, event);
    await hal.say(room, 'still there?');
    await hal.waitFor(room, /^Echo: still there\?$/, { from: bot.userId });
    const asked = upstream.requests.map((r) => String(r.body.messages.at(-1).content));
    expect(asked.some((text) => text.startsWith('y'.repeat(100)) && text.length <= 16_384), 'a huge body is cut').to.equal(true);
    expect(asked, 'a reply is read without its quote').to.include('the reply');
    expect(asked.some((text) => /an edit|who\?/.test(text))).to.equal(false);
    expect((await account()).state).to.equal('connected');

    const csv = await hal.upload(Buffer.from('name,count\nbolts,4\n'), 'text/csv');
    upstream.responder = () => openaiText('Noted.');
    await hal.say(room, 'stock.csv', { msgtype: 'm.file', url: csv, info: { mimetype: 'text/csv', size: 19 } });
    await hal.waitFor(room, /^Noted\.$/, { from: bot.userId });
    expect(String(upstream.requests.at(-1)!.body.messages.at(-1).content)).to.include('Content of stock.csv:\nname,count\nbolts,4');
    const fetched = hs.calls.filter((call) => call.path.startsWith('/_matrix/client/v1/media/download/'));
    expect(fetched.map((call) => call.user)).to.deep.equal([bot.userId]);

    expect((await home.run(['secrets', 'set', 'channels.matrix.accessToken'], { input: 'syt_revoked_token' })).code).to.equal(0);
    expect((await home.run(['restart'])).code).to.equal(0);
    const refused = await waitFor(async () => ((await account())?.state === 'error' ? await account() : undefined), 20_000, 'the account to be refused');
    expect(refused.detail).to.match(/refused the access token.*gateway secrets set channels\.matrix\.accessToken/);
    expect(JSON.stringify(refused)).to.not.include('syt_revoked_token');
  });

  it('speaks https to a homeserver whose certificate the system trusts, and sends nothing to one it does not', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gateway-matrix-tls-'));
    const key = join(dir, 'key.pem');
    const cert = join(dir, 'cert.pem');
    const made = spawnSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', key, '-out', cert], { encoding: 'utf8' });
    expect(made.status, made.stderr).to.equal(0);
    const secure = await new Homeserver({ key: readFileSync(key, 'utf8'), cert: readFileSync(cert, 'utf8') }).start();
    const tlsBot = secure.register('tlsbot');
    const jay = new MatrixPerson(secure, 'jay');
    people.push(jay);
    const trusting = new Home({ GATEWAY_PORT: String(await freePort()), NODE_EXTRA_CA_CERTS: cert });
    try {
      await trusting.set('models.providers.script', { kind: 'openai-compatible', baseUrl: upstream.url, models: ['m'], retries: { max: 0 } });
      await trusting.set('agents.helper', { model: 'script/m' });
      await trusting.set('channels.matrix', { enabled: true, homeserver: secure.url, agent: 'helper', allowFrom: [jay.userId], reconnectMaxDelayMs: 2000 });
      expect((await trusting.run(['secrets', 'set', 'channels.matrix.accessToken'], { input: tlsBot.token })).code).to.equal(0);
      expect((await trusting.run(['start'])).code).to.equal(0);
      const room = await jay.directChat(tlsBot.userId);
      await waitFor(() => (secure.membership(room, tlsBot.userId) === 'join' ? true : undefined), 20_000, 'the bot to join over https');
      await jay.say(room, 'over TLS?');
      await jay.waitFor(room, /^Echo: over TLS\?$/, { from: tlsBot.userId });

      // The same homeserver without its certificate trusted: the account says why, and no request reaches it.
      expect((await trusting.run(['stop'])).code).to.equal(0);
      const strict = new Home({ GATEWAY_PORT: String(await freePort()) }, trusting.dir);
      // The bot's calls only: the test's own person keeps syncing meanwhile.
      const botCalls = () => secure.calls.filter((call) => call.user === tlsBot.userId).length;
      const calls = botCalls();
      expect((await strict.run(['start'])).code).to.equal(0);
      const refused = await waitFor(async () => {
        const status = (await strict.json(['channels', 'status'])).channels.find((c: any) => c.channel === 'matrix');
        return status?.detail && /certificate/i.test(status.detail) ? status : undefined;
      }, 20_000, 'the account to refuse the certificate');
      expect(refused.state).to.not.equal('connected');
      expect(botCalls(), 'nothing was asked of a homeserver whose certificate is not trusted').to.equal(calls);
      await strict.run(['stop']);
    } finally {
      trusting.cleanup();
      await secure.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses settings it cannot use: a homeserver over http elsewhere than this host, a bad room or user id (exit 2); lists Matrix among the kinds', async () => {
    for (const [key, value] of [['channels.matrix.homeserver', 'ftp://matrix.example.org'], ['channels.matrix.rooms', ['lobby']], ['channels.matrix.userId', 'bot@example.org']] as const) {
      const result = await home.run(['config', 'set', key, JSON.stringify(value)]);
      expect(result.code, key).to.equal(2);
    }
    await set('channels.matrix.homeserver', 'http://matrix.example.org');
    expect((await home.run(['restart'])).code).to.equal(0);
    const refused = await waitFor(async () => ((await account())?.state === 'error' ? await account() : undefined), 20_000, 'the account to refuse');
    expect(refused.detail).to.match(/must be an https:\/\/ address/);
    const kinds = (await json(['channels', 'list'])).channels.map((c: any) => c.kind ?? c.channel);
    expect(kinds).to.include('matrix');
  });
});
