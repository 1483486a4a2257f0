import { expect } from 'chai';
import { freePort, Home, sleep, waitFor } from '../support/cli.ts';
import { codeIn, IrcServer, IrcUser } from '../support/irc.ts';
import { startModelServer } from '../support/model-server.ts';
import { openaiText, ScriptedUpstream } from '../support/scripted-upstream.ts';
import { RawSocket } from '../support/ws-client.ts';

describe('IRC channel, DM pairing and sessions against ngircd (e2e)', function () {
  let ircd: IrcServer;
  let home: Home;
  let port: number;
  let nick: string;
  const users: IrcUser[] = [];
  let serial = 0;

  const person = async (name: string) => {
    const user = await IrcUser.connect(ircd.port, `${name}${++serial}`);
    users.push(user);
    return user;
  };
  const json = async (args: string[]) => {
    const result = await home.run([...args, '--json']);
    expect(result.code, `${args.join(' ')}: ${result.stderr}`).to.equal(0);
    return JSON.parse(result.stdout);
  };
  const state = async () => (await json(['channels', 'status'])).channels.find((c: any) => c.channel === 'irc').state as string;
  const connected = () => waitFor(async () => (await state()) === 'connected', 20_000, 'the gateway to connect to IRC');
  /** A stranger's first DM and the code it is answered with. */
  const codeFor = async (user: IrcUser) => {
    const seen = user.received.length;
    user.say(nick, 'hello, who is there?');
    return codeIn((await user.waitFor(/pairing code is/, { after: seen })).text);
  };
  const session = async (peer: string) => {
    const result = await home.run(['sessions', 'show', `irc:default:dm:${peer.toLowerCase()}`, '--json']);
    return result.code === 0 ? JSON.parse(result.stdout) : undefined;
  };

  before(async () => {
    ircd = await IrcServer.start();
  });
  after(async () => {
    await ircd?.stop();
  });

  beforeEach(async () => {
    port = await freePort();
    nick = `gw${++serial}`;
    home = new Home({ GATEWAY_PORT: String(port) });
    const set = await home.run(['config', 'set', 'channels.irc', JSON.stringify({ enabled: true, host: '127.0.0.1', port: ircd.port, nick, reconnectMaxDelayMs: 2000 })]);
    expect(set.code, set.stderr).to.equal(0);
    const started = await home.run(['start']);
    expect(started.code, started.stderr).to.equal(0);
    await connected();
  });
  afterEach(() => {
    users.splice(0).forEach((user) => user.quit());
    home.cleanup();
  });

  it('stranger -> code -> pair approve from the CLI -> session; the operator answers', async () => {
    const operator = new RawSocket(`ws://127.0.0.1:${port}/`);
    await operator.connect({ token: home.token() }, ['operator.read', 'operator.pairing']);
    const stranger = await person('Stranger');
    const code = await codeFor(stranger);
    expect(code).to.match(/^[ABCDEFGHJKLMNPQRSTUVWXYZ23456789]{8}$/);
    const requested = await operator.next((frame) => frame.event === 'channel.pair.requested');
    expect(requested.payload).to.include({ channel: 'irc', account: 'default', code, sender: stranger.nick.toLowerCase() });

    const listed = await json(['pair', 'list', 'irc']);
    expect(listed.requests).to.have.length(1);
    expect(listed.requests[0]).to.include({ channel: 'irc', account: 'default', code, sender: stranger.nick.toLowerCase() });
    expect(Object.keys(listed.requests[0])).to.include.members(['createdAt', 'expiresAt']);
    expect(await session(stranger.nick), 'nothing reaches a session before approval').to.equal(undefined);

    const approved = await home.run(['pair', 'approve', 'irc', code.toLowerCase(), '--notify', '--json']);
    expect(approved.code, approved.stderr).to.equal(0);
    expect(JSON.parse(approved.stdout)).to.include({ approved: true, alreadyApproved: false, notified: true, sender: stranger.nick.toLowerCase() });
    await stranger.waitFor(/approved/);
    const resolved = await operator.next((frame) => frame.event === 'channel.pair.resolved');
    expect(resolved.payload).to.include({ code, decision: 'approved' });
    const again = await home.run(['pair', 'approve', 'irc', code, '--json']);
    expect(again.code).to.equal(0);
    expect(JSON.parse(again.stdout).alreadyApproved).to.equal(true);
    expect((await json(['pair', 'list'])).requests).to.deep.equal([]);

    stranger.say(nick, 'can you restart the build?');
    const shown = await waitFor(() => session(stranger.nick), 10_000, 'the message to land in a session');
    expect(shown.messages.map((m: any) => [m.direction, m.text])).to.deep.equal([['in', 'can you restart the build?']]);
    const event = await operator.next((frame) => frame.event === 'session.message');
    expect(event.payload.message).to.include({ direction: 'in', text: 'can you restart the build?' });
    const human = await home.run(['sessions', 'show', `irc:default:dm:${stranger.nick.toLowerCase()}`]);
    expect(human.stdout).to.contain(`<${stranger.nick}> can you restart the build?`);

    const seen = stranger.received.length;
    const sent = await home.run(['message', 'send', '--channel', 'irc', '--to', stranger.nick, 'Restarted, it is green now.']);
    expect(sent.code, sent.stderr).to.equal(0);
    const reply = await stranger.waitFor(/Restarted/, { after: seen });
    expect(reply).to.include({ from: nick, type: 'privmsg' });
    const history = await session(stranger.nick);
    expect(history.messages.map((m: any) => m.direction)).to.deep.equal(['in', 'out']);
    const list = await json(['sessions', 'list']);
    expect(list.sessions[0]).to.include({ key: `irc:default:dm:${stranger.nick.toLowerCase()}`, kind: 'direct', messageCount: 2 });
    expect((await json(['sessions', 'list', '--channel', 'irc'])).sessions.map((s: any) => s.key)).to.include(list.sessions[0].key);
    // A misspelt channel is named, as pair list names it, not answered with an empty list; a known channel with no session is an empty list.
    const misspelt = await home.run(['sessions', 'list', '--channel', 'irx']);
    expect(misspelt.code).to.equal(5);
    expect(misspelt.stderr).to.match(/No channel named irx; did you mean irc\? \(channels: [a-z, ]*\birc\b[a-z, ]*\)/);
    expect((await json(['sessions', 'list', '--channel', 'telegram'])).sessions).to.deep.equal([]);
    operator.close();
  });

  it('refuses wrong, rejected and malformed codes with exit 5, and bad sends with clear errors', async () => {
    const stranger = await person('Eve');
    const code = await codeFor(stranger);
    const wrong = await home.run(['pair', 'approve', 'irc', 'ABCDEFGH']);
    expect(wrong.code).to.equal(5);
    expect(wrong.stderr).to.match(/Pairing code ABCDEFGH on channel irc is unknown/);
    expect((await home.run(['pair', 'approve', 'irc', 'not a code at all'])).code).to.equal(5);
    expect((await home.run(['pair', 'approve', 'slack', code])).code).to.equal(5);
    expect((await home.run(['pair', 'reject', 'irc', code])).code).to.equal(0);
    const rejected = await home.run(['pair', 'approve', 'irc', code, '--json']);
    expect(rejected.code).to.equal(5);
    expect(JSON.parse(rejected.stdout).error.message).to.match(/was rejected/);
    const seen = stranger.received.length;
    stranger.say(nick, 'please?');
    await sleep(1000);
    expect(stranger.received.length, 'a rejected sender is not answered again').to.equal(seen);
    expect((await home.run(['pair', 'revoke', 'irc', 'nobody'])).code).to.equal(5);

    expect((await home.run(['message', 'send', '--channel', 'irc', '--to', 'two words', 'hi'])).code).to.equal(2);
    expect((await home.run(['message', 'send', '--channel', 'nope', '--to', 'x', 'hi'])).code).to.equal(5);
    // A misspelt channel is named, not answered with an empty list.
    for (const args of [['pair', 'list', 'irx'], ['pair', 'allowed', 'irx']]) {
      const misspelt = await home.run([...args, '--json']);
      expect(misspelt.code, args.join(' ')).to.equal(5);
      expect(misspelt.json.error.message).to.include('No channel named irx').and.include('irc');
    }
    const injection = await home.run(['message', 'send', '--channel', 'irc', '--to', stranger.nick, 'line one\r\nQUIT :gone']);
    expect(injection.code, injection.stderr).to.equal(0);
    await stranger.waitFor(/QUIT :gone/);
    expect(await state(), 'text cannot smuggle IRC commands').to.equal('connected');
  });

  it('tells the truth about delivery: a message to an offline nick is queued, not "sent", and reaches them when they come; an offline sender is not "notified"; an unknown channel is named', async () => {
    const gone = await home.run(['message', 'send', '--channel', 'irc', '--to', 'latecomer', 'hello?', '--json']);
    expect(gone.code, gone.stderr).to.equal(0);
    expect(gone.json).to.include({ sent: false });
    expect(gone.json.delivery).to.include({ status: 'pending', attempts: 1 });
    expect(gone.json.delivery.error).to.include('latecomer cannot be reached');
    expect((await session('latecomer')).messages.map((m: any) => m.text), 'the operator said it; it waits in the outbox').to.deep.equal(['hello?']);
    const human = await home.run(['message', 'send', '--channel', 'irc', '--to', 'latecomer', 'still there?']);
    expect(human.stdout).to.match(/^Queued for latecomer on irc: not delivered yet/);
    // The nick comes online: the outbox's next try reaches it, in the order said, once each.
    const latecomer = await IrcUser.connect(ircd.port, 'latecomer');
    users.push(latecomer);
    await latecomer.waitFor(/still there\?/, { timeoutMs: 30_000 });
    expect(latecomer.received.map((message) => message.text)).to.deep.equal(['hello?', 'still there?']);

    const leaver = await person('Leaver');
    const code = await codeFor(leaver);
    leaver.quit();
    await sleep(500);
    const approved = await home.run(['pair', 'approve', 'irc', code, '--notify', '--json']);
    expect(approved.code, approved.stderr).to.equal(0);
    expect(approved.json).to.include({ approved: true, notified: false });
    expect(approved.json.notifyError).to.include('cannot be reached');

    const unknown = await home.run(['pair', 'approve', 'nosuchchannel', 'ABCDEFGH', '--json']);
    expect(unknown.code).to.equal(5);
    expect(unknown.json.error.message).to.include('No channel named nosuchchannel');

    const present = await person('Present');
    const sent = await home.run(['message', 'send', '--channel', 'irc', '--to', present.nick, 'you are there', '--json']);
    expect(sent.code, sent.stderr).to.equal(0);
    await present.waitFor(/you are there/);
  });

  it('answers at most three pending strangers; the fourth is ignored', async () => {
    const strangers = await Promise.all(['Ann', 'Ben', 'Cid', 'Dot'].map((name) => person(name)));
    for (const stranger of strangers.slice(0, 3)) await codeFor(stranger);
    strangers[3]!.say(nick, 'me too');
    strangers[0]!.say(nick, 'repeat from the first');
    await sleep(1500);
    expect(strangers[3]!.received, 'no answer to the fourth').to.deep.equal([]);
    expect(strangers[0]!.received, 'no second code for a repeat').to.have.length(1);
    const { requests } = await json(['pair', 'list']);
    expect(requests.map((r: any) => r.sender).sort()).to.deep.equal(strangers.slice(0, 3).map((s) => s.nick.toLowerCase()).sort());
  });

  it('applies allowlist and disabled policies as soon as they are set', async () => {
    expect((await home.run(['config', 'set', 'channels.irc.dmPolicy', 'allowlist'])).stdout).to.not.match(/restart/i);
    const friend = await person('Friend');
    expect((await home.run(['config', 'set', 'channels.irc.allowFrom', JSON.stringify([friend.nick.toUpperCase()])])).code).to.equal(0);
    const stranger = await person('Nosy');
    stranger.say(nick, 'let me in');
    friend.say(nick, 'hi from a friend');
    await waitFor(() => session(friend.nick), 10_000, 'the friend to reach a session');
    await sleep(500);
    expect(stranger.received, 'allowlist drops strangers silently').to.deep.equal([]);
    expect((await json(['pair', 'list'])).requests).to.deep.equal([]);

    expect((await home.run(['config', 'set', 'channels.irc.dmPolicy', 'disabled'])).code).to.equal(0);
    friend.say(nick, 'are you there?');
    stranger.say(nick, 'hello?');
    await sleep(1000);
    expect((await session(friend.nick)).messages, 'disabled ignores everyone').to.have.length(1);
    expect(stranger.received).to.deep.equal([]);

    const open = await home.run(['config', 'set', 'channels.irc.dmPolicy', 'open']);
    expect(open.code).to.equal(2);
    expect(open.stderr).to.match(/needs an explicit "\*" in channels\.irc\.allowFrom/);
  });

  it('joins rooms into group sessions, answers in the room, and runs a second account', async () => {
    const second = `${nick}b`;
    expect((await home.run(['config', 'set', 'channels.irc.rooms', '["#ops"]'])).code).to.equal(0);
    expect((await home.run(['config', 'set', 'channels.irc.accounts.second', JSON.stringify({ nick: second })])).code).to.equal(0);
    expect((await home.run(['restart'])).code).to.equal(0);
    await waitFor(async () => {
      const { channels } = await json(['channels', 'status']);
      return channels.length === 2 && channels.every((c: any) => c.state === 'connected') ? channels : undefined;
    }, 20_000, 'both accounts to connect');
    const listed = await json(['channels', 'list']);
    expect(listed.channels.find((c: any) => c.channel === 'irc')).to.include({ enabled: true, running: true, dmPolicy: 'pairing' });
    expect(listed.channels.find((c: any) => c.channel === 'irc').accounts).to.deep.equal(['default', 'second']);

    const member = await person('Ops');
    await member.join('#ops');
    await sleep(300);
    member.say('#ops', 'is the deploy done?');
    const room = await waitFor(async () => {
      const result = await home.run(['sessions', 'show', 'irc:default:group:#ops', '--json']);
      return result.code === 0 ? JSON.parse(result.stdout) : undefined;
    }, 10_000, 'the room message to land in a group session');
    expect(room.session).to.include({ kind: 'group', peer: '#ops' });
    expect(room.messages[0]).to.include({ direction: 'in', sender: member.nick.toLowerCase(), text: 'is the deploy done?' });

    expect((await home.run(['message', 'send', '--channel', 'irc', '--to', '#ops', 'yes, all green'])).code).to.equal(0);
    expect(await member.waitFor(/all green/)).to.include({ from: nick, target: '#ops' });
    expect((await home.run(['message', 'send', '--channel', 'irc', '--account', 'second', '--to', member.nick, 'from the other account'])).code).to.equal(0);
    expect(await member.waitFor(/other account/)).to.include({ from: second });
    expect((await home.run(['message', 'send', '--channel', 'irc', '--account', 'third', '--to', member.nick, 'x'])).code).to.equal(5);
  });

  it('uses the server password from the secret store and reports a refused one', async () => {
    const guarded = await IrcServer.start({ password: 'open sesame' });
    try {
      await home.run(['stop']);
      await home.run(['config', 'set', 'channels.irc.port', String(guarded.port)]);
      const wrong = await home.run(['secrets', 'set', 'channels.irc.password'], { input: 'not it' });
      expect(wrong.code, wrong.stderr).to.equal(0);
      expect((await home.run(['start'])).code).to.equal(0);
      const refused = await waitFor(async () => {
        const status = (await json(['channels', 'status'])).channels[0];
        return status.state === 'error' ? status : undefined;
      }, 10_000, 'the refusal to show');
      expect(refused.detail).to.match(/refused the connection.*channels\.irc\.password/);
      expect(JSON.stringify(refused)).to.not.contain('not it');

      expect((await home.run(['secrets', 'set', 'channels.irc.password'], { input: 'open sesame' })).code).to.equal(0);
      await connected();
    } finally {
      home.cleanup();
      await guarded.stop();
    }
  });

  it('a hook sends a templated message to a person and wakes their session', async () => {
    const stranger = await person('Hana');
    expect((await home.run(['pair', 'approve', 'irc', await codeFor(stranger)])).code).to.equal(0);
    stranger.say(nick, 'ping me when the build is done');
    const key = `irc:default:dm:${stranger.nick.toLowerCase()}`;
    await waitFor(() => session(stranger.nick), 10_000, 'the session');
    for (const [k, v] of Object.entries({
      'hooks.enabled': true,
      'hooks.mappings': [
        { name: 'build', action: 'message', channel: 'irc', to: stranger.nick, text: 'Build {{build.id}} is {{build.status}}; {{build.missing}}done.' },
        { name: 'nudge', action: 'wake', sessionKey: key },
        { name: 'reply', action: 'message', text: 'Reply to {{who}}' },
      ],
      'hooks.allowedSessionKeyPrefixes': ['irc:default:dm:'],
    })) expect((await home.run(['config', 'set', k, JSON.stringify(v)])).code).to.equal(0);
    expect((await home.run(['hooks', 'token', 'set'], { input: 'hooks-secret-for-irc' })).code).to.equal(0);
    const post = (name: string, body: unknown) => fetch(`http://127.0.0.1:${port}/hooks/${name}`, {
      method: 'POST', headers: { authorization: 'Bearer hooks-secret-for-irc', 'content-type': 'application/json' }, body: JSON.stringify(body),
    });
    const operator = new RawSocket(`ws://127.0.0.1:${port}/`);
    await operator.connect({ token: home.token() }, ['operator.read']);

    const seen = stranger.received.length;
    const sent = await post('build', { build: { id: 42, status: 'green', script: '${process.exit()}' } });
    expect(sent.status).to.equal(200);
    expect((await stranger.waitFor(/^Build 42/, { after: seen })).text).to.equal('Build 42 is green; done.');
    const shown = await session(stranger.nick);
    expect(shown.messages.at(-1)).to.include({ direction: 'out', text: 'Build 42 is green; done.' });

    expect((await post('nudge', {})).status).to.equal(200);
    const wake = await operator.next((frame) => frame.event === 'session.wake');
    expect(wake.payload).to.include({ sessionKey: key, hook: 'nudge' });

    const chosen = await post('reply', { sessionKey: key, who: 'you' });
    expect(chosen.status, 'a caller may name a session under an allowed prefix').to.equal(200);
    await stranger.waitFor(/^Reply to you$/);
    expect((await post('reply', { sessionKey: 'irc:default:group:#ops', who: 'x' })).status).to.equal(400);
    operator.close();
  });

  it('connects over TLS, checking the server certificate', async () => {
    const secure = await IrcServer.start({ tls: true });
    try {
      await home.run(['stop']);
      expect((await home.run(['config', 'set', 'channels.irc.port', String(secure.tlsPort)])).code).to.equal(0);
      expect((await home.run(['config', 'set', 'channels.irc.tls', 'true'])).code).to.equal(0);
      expect((await home.run(['start'])).code).to.equal(0);
      const untrusted = await waitFor(async () => {
        const status = (await json(['channels', 'status'])).channels[0];
        return status.state === 'error' ? status : undefined;
      }, 10_000, 'the certificate to be refused');
      expect(untrusted.detail).to.match(/self-signed|certificate/i);

      // Trusting the server's certificate (as an operator would add a private CA) lets it connect.
      const trusted = await home.run(['restart'], { env: { NODE_EXTRA_CA_CERTS: secure.certificate } });
      expect(trusted.code, trusted.stderr).to.equal(0);
      await connected();
      const tlsUser = await IrcUser.connect(secure.port, `Tls${++serial}`);
      users.push(tlsUser);
      tlsUser.say(nick, 'over a plain port to a TLS-connected gateway');
      expect(codeIn((await tlsUser.waitFor(/pairing code is/)).text)).to.match(/^[A-Z2-9]{8}$/);
    } finally {
      home.cleanup();
      await secure.stop();
    }
  });

  it('reconnects when the IRC server goes away and comes back, keeping the allow-list', async () => {
    const stranger = await person('Kim');
    const code = await codeFor(stranger);
    expect((await home.run(['pair', 'approve', 'irc', code])).code).to.equal(0);

    await ircd.halt();
    await waitFor(async () => (await state()) !== 'connected', 10_000, 'the gateway to notice');
    // What the operator says while the account is down waits in the outbox.
    const away = await home.run(['message', 'send', '--channel', 'irc', '--to', stranger.nick, 'sent while the server was away', '--json']);
    expect(away.code, away.stderr).to.equal(0);
    expect(away.json.sent).to.equal(false);
    await ircd.resume();
    await connected();

    // The same person comes back under the same nick: no new code, straight into the session; the message said meanwhile reaches them.
    const back = await IrcUser.connect(ircd.port, stranger.nick);
    users.push(back);
    back.say(nick, 'I am back');
    const shown = await waitFor(async () => {
      const found = await session(back.nick);
      return found?.messages.some((m: any) => m.text === 'I am back') ? found : undefined;
    }, 10_000, 'a message after the reconnect');
    expect(shown.messages.map((m: any) => m.text)).to.deep.equal(['sent while the server was away', 'I am back']);
    await waitFor(() => [...back.received, ...stranger.received].some((message) => message.text.includes('sent while the server was away')) || undefined, 30_000, 'the message said while away');
    expect(back.received.filter((message) => /code/i.test(message.text)), 'no pairing code for an approved sender').to.deep.equal([]);
  });

  it('keeps pending codes and the allow-list across a daemon restart', async () => {
    const approved = await person('Lee');
    const pending = await person('Max');
    expect((await home.run(['pair', 'approve', 'irc', await codeFor(approved)])).code).to.equal(0);
    const pendingCode = await codeFor(pending);

    const restarted = await home.run(['restart']);
    expect(restarted.code, restarted.stderr).to.equal(0);
    await connected();

    expect((await json(['pair', 'list'])).requests.map((r: any) => r.code)).to.deep.equal([pendingCode]);
    approved.say(nick, 'still me');
    await waitFor(() => session(approved.nick), 10_000, 'the approved sender to reach a session after the restart');
    const seen = pending.received.length;
    pending.say(nick, 'still waiting');
    await sleep(700);
    expect(pending.received.length, 'the pending request is reused, not answered again').to.equal(seen);
    expect((await home.run(['pair', 'approve', 'irc', pendingCode])).code).to.equal(0);
    pending.say(nick, 'now?');
    await waitFor(() => session(pending.nick), 10_000, 'the newly approved sender to reach a session');

    const revoked = await home.run(['pair', 'revoke', 'irc', approved.nick.toUpperCase(), '--json']);
    expect(revoked.code, revoked.stderr).to.equal(0);
    expect(await codeFor(approved), 'a revoked sender is a stranger again').to.match(/^[A-Z2-9]{8}$/);
  });

  it('an agent answers approved senders and rooms that address it; strangers still get only a code; tool calls are in the session', async () => {
    const model = await startModelServer();
    try {
      const set = async (key: string, value: unknown) => expect((await home.run(['config', 'set', key, JSON.stringify(value)])).code).to.equal(0);
      await set('models.providers.local', { kind: 'openai-compatible', baseUrl: model.url, models: ['stories'] });
      // The story model calls gateway.status when it must (its arguments under a grammar), then answers the story.
      await set('agents.helper', { model: 'local/stories', maxOutputTokens: 12, tools: ['gateway.status'], toolChoice: 'required' });
      await set('channels.irc.agent', 'helper');
      await set('channels.irc.rooms', ['#help']);
      await set('runtime.senderLimit', { max: 2, windowMs: 3_600_000 });
      expect((await home.run(['restart'])).code).to.equal(0);
      await connected();
      const expected = await (await fetch(`${model.url}/chat/completions`, { method: 'POST', body: JSON.stringify({ model: 'stories', messages: [{ role: 'user', content: 'Once upon a time' }], max_tokens: 12 }) })).json() as any;
      const story = expected.choices[0].message.content as string;

      const stranger = await person('Newcomer');
      const code = await codeFor(stranger);
      const before = stranger.received.length;
      await sleep(1500);
      expect(stranger.received.length, 'a stranger gets the code and nothing else').to.equal(before);
      expect((await home.run(['pair', 'approve', 'irc', code])).code).to.equal(0);

      const seen = stranger.received.length;
      stranger.say(nick, 'Once upon a time');
      const answer = await stranger.waitFor(/\S/, { after: seen, timeoutMs: 20_000 });
      expect(answer).to.include({ from: nick, type: 'privmsg' });
      expect(answer.text).to.equal(story.trim());
      const history = await session(stranger.nick);
      expect(history.messages.map((m: any) => `${m.role}:${m.kind}${m.data?.name ? `:${m.data.name}` : ''}`)).to.deep.equal([
        'user:message', 'assistant:tool_call:gateway.status', 'tool:tool_result:gateway.status', 'assistant:message',
      ]);
      const shown = await home.run(['sessions', 'show', `irc:default:dm:${stranger.nick.toLowerCase()}`]);
      expect(shown.stdout).to.match(/\[helper calls gateway\.status\] \{\}/).and.to.match(/\[gateway\.status answers\]/);

      const member = await person('Roomie');
      await member.join('#help');
      await sleep(300);
      const roomSeen = member.received.length;
      member.say('#help', 'just chatting among ourselves');
      member.say('#help', `${nick}: Once upon a time`);
      const roomAnswer = await member.waitFor(/\S/, { after: roomSeen, timeoutMs: 20_000 });
      expect(roomAnswer).to.include({ from: nick, target: '#help' });
      await sleep(1000);
      expect(member.received.slice(roomSeen).filter((m) => m.from === nick), 'only the addressed message is answered').to.have.length(1);

      const limitSeen = stranger.received.length;
      stranger.say(nick, 'Once upon a time');
      await stranger.waitFor(/\S/, { after: limitSeen, timeoutMs: 20_000 });
      const overSeen = stranger.received.length;
      stranger.say(nick, 'and again');
      expect((await stranger.waitFor(/reached 2 messages/, { after: overSeen })).text).to.include('I will answer again');
      const quietSeen = stranger.received.length;
      stranger.say(nick, 'hello?');
      await sleep(1500);
      expect(stranger.received.length, 'over the limit, the sender is told once').to.equal(quietSeen);
    } finally {
      model.stop();
    }
  });

  it('an agent\'s reply outlives a lost connection and a killed daemon: each message is answered once, and the session says it went out', async () => {
    const upstream = await new ScriptedUpstream().start();
    try {
      const set = async (key: string, value: unknown) => expect((await home.run(['config', 'set', key, JSON.stringify(value)])).code).to.equal(0);
      await set('models.providers.script', { kind: 'openai-compatible', baseUrl: upstream.url, models: ['m'], retries: { max: 0 } });
      await set('agents.helper', { model: 'script/m' });
      await set('channels.irc.agent', 'helper');
      // On a shared store a killed daemon's running job is taken back when its lease runs out (the shortest allowed here).
      await set('jobs.leaseSeconds', 5);
      expect((await home.run(['restart'])).code).to.equal(0);
      await connected();
      const friend = await person('Pat');
      expect((await home.run(['pair', 'approve', 'irc', await codeFor(friend)])).code).to.equal(0);

      // The IRC server goes away while the agent thinks: the answer waits in the outbox, and arrives once both are back.
      upstream.enqueue({ ...openaiText('First answer'), delayMs: 1500 });
      friend.say(nick, 'question one');
      await waitFor(async () => upstream.requests.length === 1 || undefined, 10_000, 'the agent to ask its model');
      await ircd.halt();
      await sleep(2000);
      await ircd.resume();
      const back = await IrcUser.connect(ircd.port, friend.nick);
      users.push(back);
      await connected();
      await back.waitFor(/^First answer$/, { timeoutMs: 30_000 });
      await sleep(1000);
      expect(back.received.filter((message) => message.text === 'First answer'), 'delivered once').to.have.length(1);

      // The daemon is killed mid-run: the next one answers the message, once.
      upstream.enqueue({ hang: true }, openaiText('Second answer'));
      back.say(nick, 'question two');
      await waitFor(async () => upstream.requests.length === 2 || undefined, 10_000, 'the second run to ask its model');
      process.kill(home.lock().pid, 'SIGKILL');
      const started = await home.run(['start']);
      expect(started.code, started.stderr).to.equal(0);
      await connected();
      await back.waitFor(/^Second answer$/, { timeoutMs: 30_000 });
      await sleep(1500);
      expect(back.received.filter((message) => message.text === 'Second answer'), 'answered once after the restart').to.have.length(1);

      // sessions show: each answer with its delivery.
      const shown = await session(back.nick);
      const delivered = shown.messages.filter((message: any) => message.role === 'assistant' && message.delivery);
      expect(delivered.map((message: any) => [message.text, message.delivery.status])).to.deep.equal([['First answer', 'sent'], ['Second answer', 'sent']]);
      expect(delivered[0].delivery.attempts, 'the first try failed while the server was away').to.be.above(1);
      const text = await home.run(['sessions', 'show', `irc:default:dm:${back.nick.toLowerCase()}`]);
      expect(text.stdout).to.match(/First answer.*\n +\(sent to /);
    } finally {
      await upstream.stop();
    }
  });
});
