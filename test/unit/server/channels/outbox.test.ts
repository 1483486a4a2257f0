import { expect } from 'chai';
import { pino } from 'pino';
import { InboundMarks } from '../../../../src/server/channels/inbound-marks.ts';
import { Outbox, OUTBOX_LIMITS } from '../../../../src/server/channels/outbox/outbox.ts';
import { ChannelSendError, type AccountStatus, type Channel, type SendReceipt } from '../../../../src/server/kernel/channel.ts';
import { freshStore } from '../../../support/store.ts';

/** A platform in memory: each send is answered by the next scripted outcome (a receipt by default). */
class ScriptedChannel implements Channel {
  readonly id = 'chat';
  readonly sent: { to: string; text: string }[] = [];
  readonly outcomes: (Error | undefined)[] = [];
  private counter = 0;
  parts?: (text: string) => string[];

  accounts() { return ['default']; }
  async start() {}
  async stop() {}
  status(): AccountStatus[] { return []; }
  async send(_account: string, to: string, text: string): Promise<SendReceipt> {
    const outcome = this.outcomes.shift();
    if (outcome) throw outcome;
    this.sent.push({ to, text });
    return { ids: [`m${++this.counter}`] };
  }
  split(text: string) { return this.parts?.(text) ?? [text]; }
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
});
