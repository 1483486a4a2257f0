import { expect } from 'chai';
import { pino } from 'pino';
import { InboundMarks } from '../../../../src/server/channels/inbound-marks.ts';
import { Outbox, OUTBOX_LIMITS, replyDeliveries } from '../../../../src/server/channels/outbox/outbox.ts';
import { backoff } from '../../../../src/server/channels/outbox/pump.ts';
import { ChannelSendError, type AccountStatus, type Channel, type OutboundVoice, type SendOptions, type SendReceipt } from '../../../../src/server/kernel/channel.ts';
import type { Session } from '../../../../src/server/sessions/module.ts';
import type { MessageView } from '../../../../src/shared/protocol/results.ts';
import { freshStore } from '../../../support/store.ts';

/** A platform in memory: each send is answered by the next scripted outcome (a receipt by default). */
class ScriptedChannel implements Channel {
  readonly id = 'chat';
  readonly sent: { to: string; text: string }[] = [];
  /** Every try, with its account and options, whatever came of it. */
  readonly tries: { account: string; to: string; options: SendOptions }[] = [];
  readonly outcomes: (Error | undefined)[] = [];
  /** Accounts whose sends fail (the platform asked them to wait, or they are down). */
  readonly failing = new Map<string, Error>();
  private counter = 0;
  parts?: (text: string) => string[];

  accounts() { return ['default', 'second']; }
  async start() {}
  async stop() {}
  status(): AccountStatus[] { return []; }
  async send(account: string, to: string, text: string, options: SendOptions = {}): Promise<SendReceipt> {
    this.tries.push({ account, to, options });
    const down = this.failing.get(account);
    if (down) throw down;
    const outcome = this.outcomes.shift();
    if (outcome) throw outcome;
    this.sent.push({ to, text });
    return { ids: [`m${++this.counter}`] };
  }
  split(text: string) { return this.parts?.(text) ?? [text]; }
  /** Voice notes the platform took, and how many tries of one to fail first. */
  readonly voices: { to: string; voice: OutboundVoice }[] = [];
  voiceFailures = 0;
  async sendVoice(account: string, to: string, voice: OutboundVoice): Promise<SendReceipt> {
    if (this.voiceFailures > 0) {
      this.voiceFailures--;
      throw new ChannelSendError('the upload was cut');
    }
    this.voices.push({ to, voice });
    return { ids: [`v${++this.counter}`] };
  }
  normalizePeer(peer: string) { return peer; }
  isRoom() { return false; }
  checkPeer() { return undefined; }
}

describe('the outbox: replies kept until the platform takes them', () => {
  const current = freshStore();
  let now: number;
  let outbox: Outbox;
  let channel: ScriptedChannel;
  const settle = () => outbox.idle();
  /** Moves the clock on and lets the pump look again. */
  const later = async (ms: number) => {
    now += ms;
    outbox.wake('chat');
    await settle();
  };
  const rows = async () => (await outbox.list({ channel: 'chat', limit: 100 })).reverse();

  beforeEach(() => {
    now = Date.parse('2026-01-01T00:00:00Z');
    outbox = new Outbox({ store: current(), logger: pino({ level: 'silent' }), now: () => now });
    channel = new ScriptedChannel();
    outbox.attach(channel);
  });
  afterEach(() => outbox.stop());

  it('keeps a file\'s bytes with its row until it is sent, then lets them go; a failing reaction holds up nothing and is given up soon', async () => {
    const files: { to: string; name: string; data: string; caption: string }[] = [];
    const reactions: string[] = [];
    Object.assign(channel, {
      sendFile: async (_account: string, to: string, file: { name: string; data: Uint8Array }, caption: string) => {
        files.push({ to, name: file.name, data: Buffer.from(file.data).toString(), caption });
        return { ids: ['f1'] };
      },
      react: async (_account: string, to: string, reference: string, emoji: string) => {
        reactions.push(`${to} ${reference} ${emoji}`);
        throw new ChannelSendError('no such message');
      },
    });
    const data = new TextEncoder().encode('the bytes');
    await outbox.enqueue({ channel: 'chat', account: 'default', to: 'alice', kind: 'reaction', reference: 'm9', text: '👀' });
    await outbox.enqueue({ channel: 'chat', account: 'default', to: 'alice', text: 'see attached', file: { name: 'a.txt', mimeType: 'text/plain', data } });
    data.set(new TextEncoder().encode('CHANGED!!'));
    await outbox.enqueue({ channel: 'chat', account: 'default', to: 'alice', text: 'after the file' });
    await settle();
    expect(files, 'the bytes as they were when queued').to.deep.equal([{ to: 'alice', name: 'a.txt', data: 'the bytes', caption: 'see attached' }]);
    expect(channel.sent, 'the failed reaction holds up neither').to.deep.equal([{ to: 'alice', text: 'after the file' }]);
    expect(await current().get('SELECT COUNT(*) AS n FROM channel_outbox_files')).to.deep.equal({ n: 0 });
    for (let attempt = 0; attempt < OUTBOX_LIMITS.reactionAttempts; attempt++) await later(OUTBOX_LIMITS.backoffMaxMs);
    const [reaction, file] = await rows();
    expect(reaction).to.include({ kind: 'reaction', status: 'failed', attempts: OUTBOX_LIMITS.reactionAttempts, error: 'no such message' });
    expect(reactions).to.have.length(OUTBOX_LIMITS.reactionAttempts);
    expect(file).to.include({ kind: 'file', status: 'sent' });
    expect(file!.receipts).to.deep.equal(['f1']);
  });

  it('sends what is queued with the platform\'s ids, once per key', async () => {
    expect(await outbox.enqueue({ channel: 'chat', account: 'default', to: 'alice', text: 'hello', key: 'run:1', sessionKey: 's', runId: 'run_1', turnId: 7 })).to.equal(true);
    expect(await outbox.enqueue({ channel: 'chat', account: 'default', to: 'alice', text: 'hello again', key: 'run:1' }), 'a key queued already').to.equal(false);
    await settle();
    expect(channel.sent).to.deep.equal([{ to: 'alice', text: 'hello' }]);
    const [row] = await rows();
    expect(row).to.include({ status: 'sent', attempts: 1, runId: 'run_1', to: 'alice' });
    expect(row!.receipts).to.deep.equal(['m1']);
    expect(await outbox.answered('s', 7)).to.equal(true);
    expect(await outbox.answered('s', 8)).to.equal(false);
  });

  it('a reply spoken back goes as its text, then its voice note; a failed voice note is tried again without the text again, and is kept only until it is sent', async () => {
    const voice = { data: Buffer.from('OggS...OpusHead...'), mimeType: 'audio/ogg' };
    channel.voiceFailures = 1;
    await outbox.enqueue({ channel: 'chat', account: 'default', to: 'alice', text: 'The lights are on.', key: 'run:9', voice });
    await settle();
    expect(channel.sent).to.deep.equal([{ to: 'alice', text: 'The lights are on.' }]);
    expect(channel.voices).to.deep.equal([]);
    await later(backoff(1));
    expect(channel.sent, 'the text is not sent twice').to.have.length(1);
    expect(channel.voices.map((sent) => [sent.to, Buffer.from(sent.voice.data).toString(), sent.voice.mimeType])).to.deep.equal([['alice', 'OggS...OpusHead...', 'audio/ogg']]);
    const [row] = await rows();
    expect(row).to.include({ status: 'sent', attempts: 2, voice: true });
    expect(row!.receipts).to.deep.equal(['m1', 'v2']);
    const kept = await current().get<{ voice: unknown }>('SELECT voice FROM channel_outbox WHERE id = ?', row!.id);
    expect(kept!.voice, 'the audio is dropped once sent').to.equal(null);
  });

  it('retries with backoff, waits as long as the platform asks, and keeps a recipient\'s replies in order', async () => {
    channel.outcomes.push(new Error('connection lost'));
    await outbox.enqueue({ channel: 'chat', account: 'default', to: 'alice', text: 'one' });
    await outbox.enqueue({ channel: 'chat', account: 'default', to: 'alice', text: 'two' });
    await outbox.enqueue({ channel: 'chat', account: 'default', to: 'bob', text: 'for bob' });
    await settle();
    // alice's first failed: her second waits behind it; bob's is not held up.
    expect(channel.sent).to.deep.equal([{ to: 'bob', text: 'for bob' }]);
    const [first] = await rows();
    expect(first).to.include({ status: 'pending', attempts: 1, error: 'connection lost' });
    expect(Date.parse(first!.nextAttemptAt!) - now).to.equal(OUTBOX_LIMITS.backoffBaseMs);
    await later(500);
    expect(channel.sent).to.have.length(1);
    // Then a 429: the account waits what the platform said, not the backoff.
    channel.outcomes.push(new ChannelSendError('Too Many Requests', { retryAfterMs: 30_000 }));
    await later(500);
    expect(channel.sent).to.have.length(1);
    expect((await rows())[0]).to.include({ attempts: 2 });
    await later(29_000);
    expect(channel.sent).to.have.length(1);
    await later(1_000);
    expect(channel.sent.map((sent) => sent.text)).to.deep.equal(['for bob', 'one', 'two']);
  });

  it('resumes a split reply after the parts already sent', async () => {
    channel.parts = (text) => text.split('|');
    channel.outcomes.push(undefined, new Error('dropped'));
    await outbox.enqueue({ channel: 'chat', account: 'default', to: 'alice', text: 'a|b|c' });
    await settle();
    expect(channel.sent.map((sent) => sent.text)).to.deep.equal(['a']);
    await later(OUTBOX_LIMITS.backoffBaseMs);
    expect(channel.sent.map((sent) => sent.text)).to.deep.equal(['a', 'b', 'c']);
    const [row] = await rows();
    expect(row).to.include({ status: 'sent', attempts: 2 });
    expect(row!.receipts).to.deep.equal(['m1', 'm2', 'm3']);
  });

  it('gives up on a permanent refusal at once, and on any other after its last try; what follows goes on', async () => {
    channel.outcomes.push(new ChannelSendError('chat not found', { permanent: true }));
    await outbox.enqueue({ channel: 'chat', account: 'default', to: 'ghost', text: 'anyone?' });
    await settle();
    expect((await rows())[0]).to.include({ status: 'failed', attempts: 1, error: 'chat not found' });

    for (let i = 0; i < OUTBOX_LIMITS.maxAttempts; i++) channel.outcomes.push(new Error('down'));
    await outbox.enqueue({ channel: 'chat', account: 'default', to: 'alice', text: 'doomed' });
    await outbox.enqueue({ channel: 'chat', account: 'default', to: 'alice', text: 'after it' });
    await settle();
    for (let i = 1; i < OUTBOX_LIMITS.maxAttempts; i++) await later(OUTBOX_LIMITS.backoffMaxMs);
    const [, doomed, after] = await rows();
    expect(doomed).to.include({ status: 'failed', attempts: OUTBOX_LIMITS.maxAttempts, error: 'down' });
    expect(after).to.include({ status: 'sent' });
    expect(channel.sent.map((sent) => sent.text)).to.deep.equal(['after it']);
    expect(await outbox.counts()).to.deep.equal(new Map([['chat', { pending: 0, failed: 2 }]]));
  });

  it('waits for a channel this daemon does not run, and sends once it does', async () => {
    await outbox.detach('chat');
    await outbox.enqueue({ channel: 'chat', account: 'default', to: 'alice', text: 'queued while away' });
    expect(channel.sent).to.deep.equal([]);
    outbox.attach(channel);
    await settle();
    expect(channel.sent.map((sent) => sent.text)).to.deep.equal(['queued while away']);
  });

  it('knows an inbound message seen already by its platform id, and where an account left off', async () => {
    const marks = new InboundMarks({ store: current(), now: () => now });
    expect(await marks.firstSight('chat', 'default', '1001')).to.equal(true);
    expect(await marks.firstSight('chat', 'default', '1001')).to.equal(false);
    expect(await marks.firstSight('chat', 'other', '1001'), 'per account').to.equal(true);
    expect(await marks.seen('chat', 'default', '1001')).to.equal(true);
    expect(await marks.cursor('chat', 'default')).to.equal(undefined);
    await marks.setCursor('chat', 'default', 'offset-42');
    expect(await marks.cursor('chat', 'default')).to.equal('offset-42');
    await marks.setCursor('chat', 'default', undefined);
    expect(await marks.cursor('chat', 'default')).to.equal(undefined);
  });
  it('waits a second after the first failure, doubling up to five minutes', () => {
    expect([1, 2, 3, 9, 10, 30].map(backoff)).to.deep.equal([1000, 2000, 4000, 256_000, OUTBOX_LIMITS.backoffMaxMs, OUTBOX_LIMITS.backoffMaxMs]);
  });

  it('sends an account\'s waiting replies at once when it connects again, and leaves another account\'s waits alone', async () => {
    channel.failing.set('default', new Error('down'));
    channel.failing.set('second', new Error('down too'));
    await outbox.enqueue({ channel: 'chat', account: 'default', to: 'alice', text: 'for default' });
    await outbox.enqueue({ channel: 'chat', account: 'second', to: 'bob', text: 'for second' });
    await settle();
    for (let i = 0; i < 4; i++) await later(backoff(i + 1));
    const waits = (await rows()).map((row) => Date.parse(row.nextAttemptAt!) - now);
    expect(waits.every((wait) => wait > 1000), 'both wait out a longer backoff').to.equal(true);
    channel.failing.clear();
    await outbox.retryNow('chat', 'default');
    await settle();
    expect(channel.sent.map((sent) => sent.text)).to.deep.equal(['for default']);
    expect((await rows())[1]).to.include({ status: 'pending' });
  });

  it('holds only the account a platform asked to wait: another account\'s replies go meanwhile', async () => {
    channel.outcomes.push(new ChannelSendError('Too Many Requests', { retryAfterMs: 60_000 }));
    await outbox.enqueue({ channel: 'chat', account: 'default', to: 'alice', text: 'held' });
    await settle();
    await outbox.enqueue({ channel: 'chat', account: 'default', to: 'carol', text: 'also held: same account' });
    await outbox.enqueue({ channel: 'chat', account: 'second', to: 'bob', text: 'not held' });
    await later(1000);
    expect(channel.sent.map((sent) => sent.text)).to.deep.equal(['not held']);
    await later(59_000);
    expect(channel.sent.map((sent) => sent.text)).to.have.members(['not held', 'held', 'also held: same account']);
  });

  it('tells a caller waiting on a first attempt: sent, or waiting with the platform\'s reason, or still queued behind its recipient\'s earlier reply', async () => {
    const sentId = (await outbox.queue({ channel: 'chat', account: 'default', to: 'alice', text: 'hello' }))!;
    expect(await outbox.firstAttempt(sentId, 5000)).to.include({ status: 'sent', attempts: 1 });
    channel.outcomes.push(new Error('connection reset'));
    const failedId = (await outbox.queue({ channel: 'chat', account: 'default', to: 'bob', text: 'one' }))!;
    expect(await outbox.firstAttempt(failedId, 5000)).to.include({ status: 'pending', attempts: 1, error: 'connection reset' });
    const behindId = (await outbox.queue({ channel: 'chat', account: 'default', to: 'bob', text: 'two' }))!;
    const waiting = outbox.firstAttempt(behindId, 200);
    now += 200;
    expect(await waiting).to.include({ status: 'pending', attempts: 0 });
    expect(await outbox.queue({ channel: 'chat', account: 'default', to: 'bob', text: 'again', key: 'k' })).to.be.a('number');
    expect(await outbox.queue({ channel: 'chat', account: 'default', to: 'bob', text: 'again', key: 'k' }), 'a key queued already').to.equal(undefined);
  });

  it('gives up a reply past its longest age at its next failure, tries left or not', async () => {
    channel.outcomes.push(new Error('down'));
    await outbox.enqueue({ channel: 'chat', account: 'default', to: 'alice', text: 'late' });
    await settle();
    channel.outcomes.push(new Error('still down'));
    await later(OUTBOX_LIMITS.maxAgeMs);
    expect((await rows())[0]).to.include({ status: 'failed', attempts: 2, error: 'still down' });
  });

  it('puts a streamed reply\'s first part into the message it streamed into, and the rest as new messages', async () => {
    channel.parts = (text) => text.split('|');
    await outbox.enqueue({ channel: 'chat', account: 'default', to: 'alice', text: 'a|b', editOf: 'm-stream' });
    await settle();
    expect(channel.tries.map((attempt) => attempt.options.editOf)).to.deep.equal(['m-stream', undefined]);
    expect(channel.tries.map((attempt) => attempt.options.idempotencyKey)).to.deep.equal(['gw1p0', 'gw1p1']);
  });

  it('prunes what was sent or given up past the retention, never what still waits', async () => {
    channel.outcomes.push(new ChannelSendError('gone', { permanent: true }));
    await outbox.enqueue({ channel: 'chat', account: 'default', to: 'ghost', text: 'refused' });
    await outbox.enqueue({ channel: 'chat', account: 'default', to: 'alice', text: 'sent' });
    await settle();
    channel.failing.set('second', new Error('down'));
    await outbox.enqueue({ channel: 'chat', account: 'second', to: 'bob', text: 'waiting' });
    await settle();
    now += 10 * 24 * 60 * 60_000;
    expect(await outbox.prune(24 * 60 * 60_000)).to.equal(2);
    expect((await rows()).map((row) => row.status)).to.deep.equal(['pending']);
  });

  it('shows in a session\'s history how each run\'s answer stands', async () => {
    await outbox.enqueue({ channel: 'chat', account: 'default', to: 'alice', text: 'the answer', sessionKey: 'chat:default:dm:alice', runId: 'run_1' });
    await settle();
    const message = (id: number, runId: string | undefined, role: MessageView['role'], kind: MessageView['kind'] = 'message'): MessageView =>
      ({ id, direction: 'out', sender: 'agent', senderName: null, text: '', at: null, role, kind, ...(runId ? { runId } : {}) });
    const messages = [message(1, 'run_1', 'assistant', 'tool_call'), message(2, 'run_1', 'assistant'), message(3, undefined, 'user'), message(4, 'run_2', 'assistant')];
    await replyDeliveries(outbox)({ key: 'chat:default:dm:alice' } as Session, messages);
    expect(messages.map((shown) => shown.delivery?.status)).to.deep.equal([undefined, 'sent', undefined, undefined]);
    expect(messages[1]!.delivery!.receipts).to.deep.equal(['m1']);
  });
});
