import { expect } from 'chai';
import { Reconnect } from '../../../../src/server/channels/reconnect.ts';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('reconnecting with backoff', () => {
  it('waits a second, then doubles each wait up to the longest, read at each failure', () => {
    let max = 10_000;
    const reconnect = new Reconnect({ maxDelayMs: () => max });
    expect([1, 2, 3, 4, 5, 6].map(() => reconnect.next())).to.deep.equal([1000, 2000, 4000, 8000, 10_000, 10_000]);
    max = 3000;
    expect(reconnect.next()).to.equal(3000);
    expect(reconnect.longest).to.equal(3000);
    // However many failures, the wait stays the longest (no overflow to Infinity or NaN).
    for (let i = 0; i < 2000; i++) reconnect.next();
    expect(reconnect.next()).to.equal(3000);
  });

  it('starts again from a second after a good connection', () => {
    const reconnect = new Reconnect({ maxDelayMs: () => 60_000 });
    reconnect.next();
    reconnect.next();
    expect(reconnect.next()).to.equal(4000);
    reconnect.succeeded();
    expect(reconnect.next()).to.equal(1000);
    expect(reconnect.next()).to.equal(2000);
  });

  it('spreads each wait by the jitter asked for', () => {
    let draw = 0;
    const reconnect = new Reconnect({ maxDelayMs: () => 60_000, jitter: 0.2, random: () => draw });
    expect(reconnect.next()).to.equal(800);
    draw = 1;
    expect(reconnect.next()).to.be.closeTo(2400, 1e-9);
    draw = 0.5;
    expect(reconnect.next()).to.equal(4000);
  });

  it('runs a scheduled try once, in place of one still waiting', async () => {
    const reconnect = new Reconnect({ maxDelayMs: () => 60_000 });
    const ran: string[] = [];
    reconnect.schedule(() => ran.push('first'), 20);
    expect(reconnect.pending).to.equal(true);
    reconnect.schedule(() => ran.push('second'), 20);
    await sleep(60);
    expect(ran).to.deep.equal(['second']);
    expect(reconnect.pending).to.equal(false);
  });

  it('cancels the try waiting, and every later one, when stopped', async () => {
    const reconnect = new Reconnect({ maxDelayMs: () => 60_000 });
    const ran: string[] = [];
    reconnect.schedule(() => ran.push('pending'), 20);
    reconnect.stop();
    expect(reconnect.pending).to.equal(false);
    reconnect.schedule(() => ran.push('after stop'), 0);
    await sleep(50);
    expect(ran).to.deep.equal([]);
    expect(reconnect.stopped).to.equal(true);
  });

  it('ends a wait early when stopped, and waits no more after', async () => {
    const reconnect = new Reconnect({ maxDelayMs: () => 60_000 });
    const started = Date.now();
    const waiting = [reconnect.wait(30_000), reconnect.wait(30_000)];
    setTimeout(() => reconnect.stop(), 20);
    await Promise.all(waiting);
    await reconnect.wait(30_000);
    expect(Date.now() - started).to.be.lessThan(1000);
  });

  it('waits the time given, or the next backoff wait', async () => {
    const reconnect = new Reconnect({ maxDelayMs: () => 60_000 });
    const started = Date.now();
    await reconnect.wait(30);
    expect(Date.now() - started).to.be.at.least(25);
    await reconnect.wait();
    expect(Date.now() - started).to.be.at.least(1000);
    expect(reconnect.next(), 'the wait counted a failure').to.equal(2000);
  });
  it('waits the longest at once when it is shorter than the first wait', () => {
    const reconnect = new Reconnect({ maxDelayMs: () => 400 });
    expect([reconnect.next(), reconnect.next()]).to.deep.equal([400, 400]);
  });

  it('keeps every jittered wait within its share of the wait, whatever the draw', () => {
    const reconnect = new Reconnect({ maxDelayMs: () => 8000, jitter: 0.25 });
    for (let failure = 0; failure < 200; failure++) {
      const base = Math.min(1000 * 2 ** failure, 8000);
      const wait = reconnect.next();
      expect(wait).to.be.within(base * 0.75, base * 1.25);
    }
  });

  it('counts a failure when it schedules without a wait given', async () => {
    const reconnect = new Reconnect({ maxDelayMs: () => 60_000 });
    reconnect.schedule(() => undefined);
    expect(reconnect.pending).to.equal(true);
    reconnect.stop();
    expect(reconnect.next(), 'the scheduled try took the first wait').to.equal(2000);
  });
});
