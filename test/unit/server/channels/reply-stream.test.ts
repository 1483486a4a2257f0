import { expect } from 'chai';
import { pino } from 'pino';
import { ChannelSendError, type Channel, type SendOptions } from '../../../../src/server/kernel/channel.ts';
import { ReplyStream } from '../../../../src/server/channels/reply-stream.ts';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A channel that records what it was asked to send or edit. */
function recorder(options: { limit?: number; failAfter?: number } = {}) {
  const calls: { text: string; editOf?: string; at: number }[] = [];
  const channel = {
    id: 'test', edits: true,
    split: (text: string) => (options.limit && text.length > options.limit ? [text.slice(0, options.limit), text.slice(options.limit)] : [text]),
    send: async (_account: string, _to: string, text: string, sendOptions: SendOptions = {}) => {
      if (options.failAfter !== undefined && calls.length >= options.failAfter) throw new ChannelSendError('429', { retryAfterMs: 5000 });
      calls.push({ text, editOf: sendOptions.editOf, at: Date.now() });
      return { ids: [sendOptions.editOf ?? 'm1'] };
    },
  } as unknown as Channel;
  return { channel, calls };
}

describe('a reply streamed into one message', () => {
  const log = pino({ level: 'silent' });

  it('sends once there is some text, then edits the same message with the latest text, at most once a second', async () => {
    const { channel, calls } = recorder();
    const stream = new ReplyStream(channel, 'default', 'alice', log);
    for (let i = 0; i < 25; i++) {
      stream.push(`word${i} `);
      await sleep(100);
    }
    expect(await stream.finish()).to.equal('m1');
    expect(calls[0]!.editOf).to.equal(undefined);
    expect(calls.slice(1).every((call) => call.editOf === 'm1')).to.equal(true);
    expect(calls.length).to.be.within(2, 4);
    for (let i = 2; i < calls.length; i++) expect(calls[i]!.at - calls[i - 1]!.at).to.be.at.least(950);
    calls.forEach((call, i) => i > 0 && expect(call.text.startsWith(calls[i - 1]!.text.trim())).to.equal(true));
  });

  it('stops when the first message is full, and when the platform refuses: the final reply still goes through the outbox', async () => {
    const full = recorder({ limit: 50 });
    const stream = new ReplyStream(full.channel, 'default', 'alice', log);
    stream.push('x'.repeat(45));
    await sleep(50);
    stream.push('y'.repeat(40));
    await sleep(1200);
    stream.push('z'.repeat(40));
    await sleep(1200);
    expect(await stream.finish()).to.equal('m1');
    expect(full.calls.map((call) => call.text.length)).to.deep.equal([45, 50]);

    const refusing = recorder({ failAfter: 1 });
    const second = new ReplyStream(refusing.channel, 'default', 'bob', log);
    second.push('a'.repeat(60));
    await sleep(50);
    second.push('more');
    await sleep(1200);
    second.push('and more');
    await sleep(1200);
    expect(await second.finish(), 'the message shown so far still takes the final text').to.equal('m1');
    expect(refusing.calls).to.have.length(1);
  });
});
