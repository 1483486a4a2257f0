import { expect } from 'chai';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, Home, sleep, waitFor } from '../support/cli.ts';
import { testEngine } from '../support/postgres.ts';
import { openaiText, ScriptedUpstream } from '../support/scripted-upstream.ts';
import { SignalCli, type SignalPerson } from '../support/signal-cli.ts';

const BOT = '+15550000001';
const MENTION = '\uFFFC';

/** The gateway against a stand-in of signal-cli's HTTP daemon: what people's phones would receive is what signal-cli was asked to send. */
describe('Signal channel (e2e, a stand-in of signal-cli daemon --http)', function () {
  this.timeout(180_000);
  let cli: SignalCli;
  let home: Home;
  let upstream: ScriptedUpstream;
  let allowed: string[] = [];

  const json = (args: string[]) => home.json(args);
  const set = (key: string, value: unknown) => home.set(key, value);
  const account = async () => (await json(['channels', 'status'])).channels.find((c: any) => c.channel === 'signal') as { state: string; detail?: string };
  const connected = () => waitFor(async () => ((await account())?.state === 'connected' ? true : undefined), 30_000, 'the account to connect');
  const replyFor = (to: string | SignalPerson, after: number, pattern: RegExp = /\S/) =>
    waitFor(() => cli.texts(to).slice(after).find((text) => pattern.test(text)), 30_000, `a message to ${typeof to === 'string' ? to : to.name} matching ${pattern}`);
  /** A person the gateway lets in (allowFrom, by their number, or their ACI when Signal hides it). */
  const allowedPerson = async (name: string, number?: string | null) => {
    const person = cli.person(name, number);
    allowed.push(person.number ?? person.uuid);
    await set('channels.signal.allowFrom', allowed);
    return person;
  };
  const inbound = async (key: string) => (await json(['sessions', 'show', key])).messages.filter((m: any) => m.direction === 'in').map((m: any) => m.text);

  beforeEach(async () => {
    allowed = [];
    cli = await new SignalCli({ accounts: [BOT] }).start();
    upstream = await new ScriptedUpstream().start();
    upstream.responder = (request) => openaiText(`Answer: ${String(request.body.messages.at(-1).content)}`);
    home = new Home({ GATEWAY_PORT: String(await freePort()) });
    await set('models.providers.script', { kind: 'openai-compatible', baseUrl: upstream.url, models: ['m'], retries: { max: 0 } });
    await set('agents.helper', { model: 'script/m' });
    await set('channels.signal', { enabled: true, account: BOT, rpcUrl: cli.url, agent: 'helper', reconnectMaxDelayMs: 2000 });
    const started = await home.run(['start']);
    expect(started.code, started.stderr).to.equal(0);
    await connected();
  });
  afterEach(async () => {
    home.cleanup();
    await cli.stop();
    await upstream.stop();
  });

  it('a stranger gets a code and nothing else; approved with gateway pair approve signal, the agent answers in Signal\'s styles, typing shown and the message marked read', async () => {
    expect(await account()).to.include({ state: 'connected', detail: BOT });
    expect((await json(['channels', 'list'])).channels.map((c: any) => c.channel)).to.include('signal');
    upstream.responder = (request) => openaiText(`**Answer**: ${String(request.body.messages.at(-1).content)}`);

    const ann = cli.person('Ann');
    cli.say(ann, 'hello?');
    const codeText = await replyFor(ann, 0, /pairing code is/);
    const code = /pairing code is ([A-Z2-9]{8})/.exec(codeText)![1]!;
    expect(codeText).to.include(`gateway pair approve signal ${code}`);
    await sleep(1000);
    expect(cli.texts(ann), 'the code and nothing else').to.have.length(1);
    expect(upstream.requests, 'no model call for a stranger').to.have.length(0);
    expect(cli.receipts, 'a stranger\'s message is not marked read').to.deep.equal([]);
    const pending = await json(['pair', 'list', 'signal']);
    expect(pending.requests[0]).to.include({ channel: 'signal', account: 'default', code, sender: ann.number, senderName: 'Ann' });

    const approved = await json(['pair', 'approve', 'signal', code, '--notify']);
    expect(approved).to.include({ approved: true, notified: true });
    expect(await replyFor(ann, 1)).to.match(/approved/);

    const asked = cli.say(ann, 'Once upon a time');
    expect(await replyFor(ann, 2)).to.equal('Answer: Once upon a time');
    const sent = cli.sentTo(ann).at(-1)!;
    expect(sent.textStyle, 'Markdown as Signal\'s styles').to.deep.equal(['0:6:BOLD']);
    expect(cli.typing.some((entry) => entry.to === ann.number && !entry.stop), 'typing shown').to.equal(true);
    await waitFor(() => cli.receipts.find((receipt) => receipt.timestamps.includes(asked)), 10_000, 'the read receipt');
    expect(cli.receipts.find((receipt) => receipt.timestamps.includes(asked))).to.include({ recipient: ann.uuid, type: 'read' });

    const shown = await json(['sessions', 'show', `signal:default:dm:${ann.number}`]);
    const last = shown.messages.at(-1);
    expect(last).to.include({ role: 'assistant', text: '**Answer**: Once upon a time' });
    expect(last.delivery).to.include({ status: 'sent', to: ann.number });
    expect(last.delivery.receipts).to.deep.equal([String(sent.timestamp)]);

    // Someone whose number Signal does not show is known by their ACI, and answered there.
    const ghost = await allowedPerson('Ghost', null);
    cli.say(ghost, 'can you see my number?');
    expect(await replyFor(ghost.uuid, 0)).to.equal('Answer: can you see my number?');
    expect(await inbound(`signal:default:dm:${ghost.uuid}`)).to.deep.equal(['can you see my number?']);
    // signal-cli was only ever asked for one message at a time; nothing waits, nothing was lost.
    expect(cli.calls.filter((call) => call.method === 'receive').every((call) => call.params.maxMessages === 1 && call.params.account === undefined)).to.equal(true);
    expect(cli.waiting()).to.equal(0);
    expect(cli.lost).to.deep.equal([]);
  });

  it('in a group, answers only when mentioned or quoted, and only in the groups it may answer in', async () => {
    const bob = cli.person('Bob');
    const carol = cli.person('Carol');
    const ops = cli.group('Ops', [bob, carol]);
    const elsewhere = cli.group('Elsewhere', [bob]);
    await set('channels.signal.rooms', [ops]);
    const me = { number: BOT, uuid: cli.aciOf(BOT) };

    cli.say(bob, 'just chatting among ourselves', { group: ops });
    cli.say(carol, `ask ${MENTION} later`, { group: ops, mentions: [bob] });
    await sleep(1500);
    expect(cli.texts(ops), 'a group message without a mention is not answered').to.deep.equal([]);

    const mentioned = cli.say(bob, `${MENTION} what is up?`, { group: ops, mentions: [{ uuid: me.uuid }] });
    expect(await replyFor(ops, 0)).to.equal('Answer: Bob: what is up?');
    const answer = cli.sentTo(ops).at(-1)!;
    cli.say(carol, 'and then?', { group: ops, quote: { id: answer.timestamp, author: me } });
    expect(await replyFor(ops, 1)).to.equal('Answer: Carol: and then?');
    await waitFor(() => cli.receipts.find((receipt) => receipt.timestamps.includes(mentioned)), 10_000, 'the read receipt');
    expect(cli.receipts.map((receipt) => receipt.recipient)).to.have.members([bob.uuid, carol.uuid]);
    expect(cli.typing.some((entry) => entry.to === ops)).to.equal(true);

    cli.say(bob, `${MENTION} hello`, { group: elsewhere, mentions: [{ uuid: me.uuid }] });
    await sleep(1500);
    expect(cli.texts(elsewhere), 'a group not in channels.signal.rooms').to.deep.equal([]);
    expect(upstream.requests).to.have.length(2);
    expect(await inbound(`signal:default:group:${ops}`)).to.deep.equal(['just chatting among ourselves', `ask @${bob.number} later`, `@${BOT} what is up?`, 'and then?']);
    expect((await json(['sessions', 'list'])).sessions.map((s: any) => s.key)).to.not.include(`signal:default:group:${elsewhere}`);
  });

  it('photos and files reach the agent: an image to a model that takes images, a text file as text, an oversized one named and not kept', async () => {
    const eve = await allowedPerson('Eve');
    await set('channels.signal.maxAttachmentBytes', 64 * 1024);
    await set('models.providers.script.imageModels', ['m']);
    upstream.responder = () => openaiText('Seen.');
    const content = () => upstream.requests.at(-1)!.body.messages.at(-1).content;
    const flat = (value: unknown) => (typeof value === 'string' ? value : (value as any[]).map((part) => part.text ?? '').join('\n'));
    const jpeg = Uint8Array.from({ length: 30_000 }, (_, index) => [0xff, 0xd8, 0xff, 0xe0][index] ?? (index * 7) % 256);

    cli.say(eve, 'what is this?', { files: [cli.file(jpeg, 'image/jpeg')] });
    await replyFor(eve, 0, /Seen/);
    const parts = content() as any[];
    expect(parts[0]).to.deep.equal({ type: 'text', text: 'what is this?' });
    expect(parts[1].image_url.url).to.equal(`data:image/jpeg;base64,${Buffer.from(jpeg).toString('base64')}`);

    const big = cli.file(new Uint8Array(100_000), 'application/pdf', 'big.pdf');
    cli.say(eve, '', { files: [cli.file(new TextEncoder().encode('remember the milk'), 'text/plain', 'notes.txt'), big] });
    await replyFor(eve, 1, /Seen/);
    expect(flat(content())).to.equal("[file notes.txt (text/plain, 17 bytes)]\nContent of notes.txt:\nremember the milk\n[file big.pdf (application/pdf, 98 KB): not kept: larger than this channel's limit of 64 KB]");
    const fetched = cli.calls.filter((call) => call.method === 'getAttachment');
    expect(fetched.map((call) => call.params.recipient)).to.deep.equal([eve.uuid, eve.uuid]);
    expect(cli.calls.some((call) => call.method === 'getAttachment' && call.params.id === big.id), 'an oversized file is never fetched').to.equal(false);
    const shown = await json(['sessions', 'show', `signal:default:dm:${eve.number}`]);
    const files = shown.messages.filter((message: any) => message.direction === 'in').map((message: any) => message.data.attachments.map((file: any) => [file.name, file.kept]));
    expect(files).to.deep.equal([[['photo.jpg', true]], [['notes.txt', true], ['big.pdf', false]]]);
  });

  it('kill -9: what was stored is answered once after a restart; a message sent while the gateway is down waits on Signal\'s server and is answered once; only what a receive in flight took meanwhile is lost', async () => {
    const dan = await allowedPerson('Dan');
    // Two answers are out before the kill; the third's run is at the model (its first try), the fourth's waits behind it.
    const slow = new Set(['question 3']);
    upstream.responder = (request) => {
      const question = String(request.body.messages.at(-1).content);
      return { ...openaiText(`Answer: ${question}`), ...(slow.delete(question) ? { delayMs: 60_000 } : {}) };
    };
    const questions = Array.from({ length: 4 }, (_, index) => `question ${index + 1}`);
    for (const question of questions) cli.say(dan, question);
    await waitFor(async () => ((await json(['sessions', 'show', `signal:default:dm:${dan.number}`])).messages
      .filter((m: any) => m.delivery?.status === 'sent').length === 2 ? true : undefined), 30_000, 'two answers sent and recorded');
    await waitFor(() => (cli.waiting() === 0 && cli.receiving === 1 ? true : undefined), 10_000, 'every question taken, the next receive waiting');
    process.kill(home.lock().pid, 'SIGKILL');
    await sleep(300);

    // What is at risk, exactly: signal-cli's receive in flight runs its course (up to 5 s) and writes what it took to a closed connection.
    cli.say(dan, 'said just after the kill');
    await waitFor(() => (cli.receiving === 0 ? true : undefined), 10_000, 'the orphaned receive to end');
    expect(cli.lost).to.have.length(1);
    expect(JSON.stringify(cli.lost[0])).to.include('said just after the kill');

    // After that, Signal's server keeps what comes until the gateway asks.
    cli.say(dan, 'question 5');
    questions.push('question 5');
    await sleep(500);
    expect(cli.waiting()).to.equal(1);
    const started = await home.run(['start']);
    expect(started.code, started.stderr).to.equal(0);
    await waitFor(() => (cli.texts(dan).length >= questions.length ? true : undefined), 60_000, 'every answer');
    await sleep(2000);
    expect([...cli.texts(dan)].sort()).to.deep.equal(questions.map((question) => `Answer: ${question}`).sort());
    expect(await inbound(`signal:default:dm:${dan.number}`), 'each stored once').to.deep.equal(questions);
  });

  it('started again at once after kill -9, while the dead gateway\'s receive still runs: signal-cli refuses a second for those seconds, and the account waits them out rather than take it for signal-cli receiving by itself', async () => {
    const kim = await allowedPerson('Kim');
    await waitFor(() => (cli.receiving === 1 ? true : undefined), 10_000, 'a receive waiting');
    process.kill(home.lock().pid, 'SIGKILL');
    const refused = cli.refusedReceives;
    expect((await home.run(['start'])).code).to.equal(0);
    await connected();
    // Sharing a PostgreSQL store, the new daemon takes the channel only once the dead one's lock is gone: the receive may be over by then.
    if (testEngine() === 'sqlite') await waitFor(() => (cli.refusedReceives > refused ? true : undefined), 10_000, 'a receive refused while the dead one runs');
    await waitFor(() => (cli.orphaned === 0 && cli.receiving === 1 ? true : undefined), 15_000, 'the orphaned receive over, the new gateway\'s running');
    cli.say(kim, 'still there?');
    expect(await replyFor(kim, 0)).to.equal('Answer: still there?');
    expect((await account()).detail).to.equal(BOT);
    expect(cli.streams, 'never the event stream').to.equal(0);
    expect(cli.lost).to.deep.equal([]);
  });

  it('a graceful restart waits for the receive in flight: nothing sent meanwhile is lost, each answered once', async () => {
    const fay = await allowedPerson('Fay');
    const said: string[] = [];
    const restart = home.run(['restart']);
    for (let index = 0; index < 12; index++) {
      said.push(`during the restart ${index}`);
      cli.say(fay, said.at(-1)!);
      await sleep(400);
    }
    const restarted = await restart;
    expect(restarted.code, restarted.stderr).to.equal(0);
    await connected();
    await waitFor(() => (cli.texts(fay).length >= said.length ? true : undefined), 60_000, 'every answer');
    await sleep(1500);
    expect([...cli.texts(fay)].sort()).to.deep.equal(said.map((text) => `Answer: ${text}`).sort());
    expect(cli.lost).to.deep.equal([]);
  });

  it('malformed envelopes and what is not a message are let go, nothing of them stored; the account stays connected', async () => {
    const gus = await allowedPerson('Gus');
    const ops = cli.group('Ops', [gus]);
    for (const bad of [
      null, 'MALFORMED-1', [1, 2], { envelope: 'MALFORMED-2' }, { envelope: { sourceNumber: 'MALFORMED-3', dataMessage: { message: 'MALFORMED-3' } } },
      { account: '+15559999999', envelope: { sourceNumber: gus.number, sourceUuid: gus.uuid, timestamp: 1, dataMessage: { message: 'MALFORMED-4 for another account' } } },
      { envelope: { sourceNumber: gus.number, sourceUuid: gus.uuid, timestamp: 'soon', dataMessage: { message: 'MALFORMED-5' } } },
      { envelope: { sourceNumber: gus.number, sourceUuid: gus.uuid, timestamp: 2, dataMessage: { message: { text: 'MALFORMED-6' } } } },
      { envelope: { sourceNumber: gus.number, sourceUuid: gus.uuid, timestamp: 3, dataMessage: { message: 'MALFORMED-7', groupInfo: { groupId: '../../x' } } } },
    ]) cli.push(bad);
    // What is sound in a message is read; the rest of it is not.
    cli.push({ envelope: { sourceNumber: gus.number, sourceUuid: gus.uuid, timestamp: 4, dataMessage: { message: 'partly sound', mentions: 'all', attachments: [{ id: '../../../etc/passwd' }, 'x'] } } });
    cli.envelope(gus, { typingMessage: { action: 'STARTED', timestamp: 1 } });
    cli.envelope(gus, { receiptMessage: { when: 1, isDelivery: true, timestamps: [1] } });
    cli.envelope(gus, { editMessage: { targetSentTimestamp: 1, dataMessage: { message: 'MALFORMED-9 an edit' } } });
    cli.envelope(gus, { dataMessage: { timestamp: 5, message: 'MALFORMED-10 a reaction', reaction: { emoji: '👍' } } });
    cli.say(gus, 'MALFORMED-11 in a group the agent may not answer', { group: ops });
    cli.say(gus, 'x'.repeat(100_000));
    cli.say(gus, 'still there?');
    expect(await replyFor(gus, 0, /still there/)).to.equal('Answer: still there?');
    const texts = await inbound(`signal:default:dm:${gus.number}`);
    expect(texts.map((text: string) => text.slice(0, 20))).to.deep.equal(['partly sound', 'x'.repeat(20), 'still there?']);
    expect(texts[1]).to.have.length(16_384);
    expect(cli.calls.filter((call) => call.method === 'getAttachment')).to.deep.equal([]);
    expect(home.stateText()).to.not.include('MALFORMED');
    expect(cli.waiting()).to.equal(0);
    expect((await account()).state).to.equal('connected');
  });

  it('signal-cli down then back: the account says how to start it; an operator\'s message waits in the outbox and people\'s on Signal\'s server, each delivered once; rate limits are waited out, an unknown number refused for good', async () => {
    const hal = await allowedPerson('Hal');
    cli.say(hal, 'first');
    await replyFor(hal, 0);
    await cli.stop();
    const down = await waitFor(async () => {
      const status = await account();
      return status.state !== 'connected' && /cannot reach signal-cli/.test(status.detail ?? '') ? status : undefined;
    }, 20_000, 'the account to notice');
    expect(down.detail).to.include(`signal-cli -a ${BOT} daemon --http 127.0.0.1:${cli.port} --receive-mode=manual`);

    const queued = await home.run(['message', 'send', '--channel', 'signal', '--to', hal.number!, 'Said while signal-cli was away', '--json']);
    expect(queued.code, queued.stderr).to.equal(0);
    expect(queued.json).to.include({ sent: false });
    expect(queued.json.delivery.status).to.equal('pending');
    cli.say(hal, 'while you were away');
    await cli.start(cli.port);
    await connected();
    await replyFor(hal, 1, /Said while signal-cli was away/);
    await replyFor(hal, 1, /Answer: while you were away/);
    await sleep(1500);
    expect(cli.texts(hal)).to.deep.equal(['Answer: first', 'Said while signal-cli was away', 'Answer: while you were away']);

    // Signal rate-limits the account: the whole account waits as long as it says.
    cli.fail('send', { code: -5, message: 'Failed to send message due to rate limiting', data: { response: { timestamp: 1, results: [{ recipientAddress: { uuid: hal.uuid, number: hal.number }, type: 'RATE_LIMIT_FAILURE', retryAfterSeconds: 2 }] } } });
    cli.say(hal, 'slowly');
    await replyFor(hal, 3, /slowly/);
    const tries = cli.calls.filter((call) => call.method === 'send' && call.params.message === 'Answer: slowly');
    expect(tries).to.have.length(2);
    expect(tries[1]!.at - tries[0]!.at).to.be.at.least(2000);

    const nobody = await home.run(['message', 'send', '--channel', 'signal', '--to', '+15559999999', 'hello?', '--json']);
    expect(nobody.code).to.equal(1);
    expect(JSON.stringify(nobody.json)).to.include('not registered with Signal');
    const refused = await home.run(['message', 'send', '--channel', 'signal', '--to', 'alice', 'hello?']);
    expect(refused.code).to.equal(2);
  });

  it('a signal-cli that receives by itself: read through its event stream, the status says what is at risk, a dropped stream is read again; what arrives while the gateway is away is lost, as it says', async () => {
    const ida = await allowedPerson('Ida');
    await cli.stop();
    cli.receiveMode = 'on-start';
    await cli.start(cli.port);
    const status = await waitFor(async () => {
      const now = await account();
      return now.state === 'connected' && /receive-mode=manual/.test(now.detail ?? '') ? now : undefined;
    }, 30_000, 'the account on the event stream');
    expect(status.detail).to.include('what arrives while the gateway is away is lost');
    cli.say(ida, 'over the stream');
    expect(await replyFor(ida, 0)).to.equal('Answer: over the stream');
    cli.rawEvent('MALFORMED not JSON');
    cli.push({ envelope: { sourceNumber: ida.number, dataMessage: 'MALFORMED' } });

    // The stream drops: read again after backoff.
    await cli.stop();
    await cli.start(cli.port);
    await waitFor(() => (cli.streams === 1 ? true : undefined), 20_000, 'the stream read again');
    cli.say(ida, 'after the drop');
    expect(await replyFor(ida, 1)).to.equal('Answer: after the drop');

    expect((await home.run(['stop'])).code).to.equal(0);
    // signal-cli notices the closed stream only when writing to it fails: what it took meanwhile went nowhere.
    cli.say(ida, 'while the gateway is away');
    await waitFor(() => (cli.lost.length === 1 ? true : undefined), 40_000, 'the message signal-cli could hand to no one');
    expect((await home.run(['start'])).code).to.equal(0);
    await sleep(3000);
    expect(cli.texts(ida)).to.deep.equal(['Answer: over the stream', 'Answer: after the drop']);
    expect(home.stateText()).to.not.include('MALFORMED');
  });

  it('two accounts on one signal-cli serving several (started without -a): each receives its own people and answers from its own number', async () => {
    const SECOND = '+15550000002';
    const shared = await new SignalCli({ accounts: [BOT, SECOND], multiAccount: true }).start();
    try {
      const jo = shared.person('Jo');
      await set('channels.signal.allowFrom', [jo.number]);
      await set('channels.signal.rpcUrl', shared.url);
      await set('channels.signal.accounts.two', { account: SECOND });
      expect((await home.run(['restart'])).code).to.equal(0);
      await waitFor(async () => {
        const states = (await json(['channels', 'status'])).channels.filter((c: any) => c.channel === 'signal');
        return states.length === 2 && states.every((c: any) => c.state === 'connected') ? states : undefined;
      }, 30_000, 'both accounts connected');
      shared.say(jo, 'to the first');
      shared.say(jo, 'to the second', { to: SECOND });
      await waitFor(() => (shared.texts(jo).length >= 2 ? true : undefined), 30_000, 'both answers');
      expect(shared.sentTo(jo).map((sent) => [sent.from, sent.text]).sort()).to.deep.equal([[BOT, 'Answer: to the first'], [SECOND, 'Answer: to the second']]);
      expect(await inbound(`signal:two:dm:${jo.number}`)).to.deep.equal(['to the second']);
      const receives = shared.calls.filter((call) => call.method === 'receive');
      expect(new Set(receives.map((call) => call.params.account))).to.deep.equal(new Set([BOT, SECOND]));
    } finally {
      await shared.stop();
    }
  });

  it('gateway doctor says when signal-cli is missing or not running, and how to link or register the number; a multi-account signal-cli without it puts the account in error', async () => {
    const bin = mkdtempSync(join(tmpdir(), 'signal-cli-bin-'));
    const other = await new SignalCli({ accounts: ['+15550009999'], multiAccount: true }).start();
    try {
      const doctor = async (path: string) => {
        const result = await home.run(['doctor', '--json'], { env: { PATH: path } });
        return (result.json as { checks: { name: string; status: string; detail: string; fix?: string }[] }).checks.find((check) => check.name === 'signal')!;
      };
      const nodeOnly = `${join(process.execPath, '..')}:/usr/bin:/bin`;
      expect(await doctor(nodeOnly)).to.include({ status: 'ok' });

      await cli.stop();
      const missing = await doctor(nodeOnly);
      expect(missing.status).to.equal('fail');
      expect(missing.detail).to.include('signal-cli is not installed');
      expect(missing.fix).to.include('https://github.com/AsamK/signal-cli/releases');
      expect(missing.fix).to.include(`signal-cli -a ${BOT} daemon --http 127.0.0.1:${cli.port} --receive-mode=manual`);

      writeFileSync(join(bin, 'signal-cli'), '#!/bin/sh\necho "signal-cli 0.14.6"\n');
      chmodSync(join(bin, 'signal-cli'), 0o755);
      const stopped = await doctor(`${bin}:${nodeOnly}`);
      expect(stopped.status).to.equal('fail');
      expect(stopped.detail).to.include(`nothing answers at ${cli.url}`);
      expect(stopped.fix).to.include(`signal-cli -a ${BOT} daemon --http 127.0.0.1:${cli.port} --receive-mode=manual`);

      await set('channels.signal.rpcUrl', other.url);
      const unknown = await doctor(`${bin}:${nodeOnly}`);
      expect(unknown.status).to.equal('fail');
      expect(unknown.detail).to.include(`has no account ${BOT}`);
      expect(unknown.fix).to.include('signal-cli link -n gateway').and.to.include(`signal-cli -a ${BOT} register`).and.to.include(`signal-cli -a ${BOT} verify`);

      expect((await home.run(['restart'])).code).to.equal(0);
      const refused = await waitFor(async () => ((await account()).state === 'error' ? account() : undefined), 20_000, 'the account in error');
      expect(refused.detail).to.include(`has no account ${BOT}`).and.to.include('signal-cli link -n gateway');
      expect(other.calls.filter((call) => call.method === 'receive'), 'nothing received for an account signal-cli does not have').to.deep.equal([]);

      expect((await home.run(['config', 'unset', 'channels.signal.account'])).code).to.equal(0);
      const unnamed = await doctor(`${bin}:${nodeOnly}`);
      expect(unnamed).to.include({ status: 'fail', detail: 'no number is set' });
      expect(unnamed.fix).to.include('gateway config set channels.signal.account +15550100');
    } finally {
      await other.stop();
      rmSync(bin, { recursive: true, force: true });
    }
  });
});
