import { expect } from 'chai';
import { AuthLockout, RequestBudget, WindowCounter } from '../../../src/server/auth/throttle.ts';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('request budgets and lockouts', () => {
  it('counts each key in a window of its own that starts at its first count, and forgets windows that ended', () => {
    const counter = new WindowCounter(1000);
    expect(counter.hit('a', 10_000)).to.deep.equal({ count: 1, endsAt: 11_000 });
    expect(counter.hit('a', 10_500).count).to.equal(2);
    expect(counter.hit('b', 10_900)).to.deep.equal({ count: 1, endsAt: 11_900 });
    expect(counter.peek('a', 10_999)?.count).to.equal(2);
    expect(counter.peek('a', 11_000)).to.equal(undefined);
    // A count after the window ended starts the next one.
    expect(counter.hit('a', 11_000)).to.deep.equal({ count: 1, endsAt: 12_000 });
    // Windows that ended go at the next sweep, so keys seen once do not stay.
    for (let i = 0; i < 100; i++) counter.hit(`once-${i}`, 11_100);
    expect(counter.size).to.equal(102);
    counter.hit('c', 13_000);
    expect(counter.size).to.equal(1);
  });

  it('answers 0 while a budget lasts, then the wait until its window ends, per key', async () => {
    const budget = new RequestBudget(3, 200);
    expect([budget.spend('k'), budget.spend('k'), budget.spend('k')]).to.deep.equal([0, 0, 0]);
    const wait = budget.spend('k');
    expect(wait).to.be.greaterThan(0).and.at.most(200);
    expect(budget.spend('other')).to.equal(0);
    await sleep(wait + 10);
    expect(budget.spend('k')).to.equal(0);
  });

  it('locks an address out after the failures allowed, for the lockout; a success clears the failures; loopback may be exempt', () => {
    const settings = { maxFailures: 3, windowMs: 60_000, lockoutMs: 300_000, exemptLoopback: true };
    const lockout = new AuthLockout(settings);
    expect(lockout.fail('192.0.2.1', 'bearer')).to.equal(0);
    expect(lockout.fail('192.0.2.1', 'bearer')).to.equal(0);
    lockout.succeed('192.0.2.1', 'bearer');
    expect(lockout.fail('192.0.2.1', 'bearer')).to.equal(0);
    expect(lockout.fail('192.0.2.1', 'bearer')).to.equal(0);
    expect(lockout.retryAfterMs('192.0.2.1', 'bearer')).to.equal(0);
    expect(lockout.fail('192.0.2.1', 'bearer')).to.equal(300_000);
    const wait = lockout.retryAfterMs('192.0.2.1', 'bearer');
    expect(wait).to.be.greaterThan(299_000).and.at.most(300_000);
    // Kinds and addresses are counted apart.
    expect(lockout.retryAfterMs('192.0.2.1', 'device')).to.equal(0);
    expect(lockout.retryAfterMs('192.0.2.2', 'bearer')).to.equal(0);
    for (let i = 0; i < 10; i++) expect(lockout.fail('127.0.0.1', 'bearer')).to.equal(0);
    expect(lockout.retryAfterMs('127.0.0.1', 'bearer')).to.equal(0);
    const strict = new AuthLockout({ ...settings, exemptLoopback: false });
    for (let i = 0; i < 2; i++) strict.fail('127.0.0.1', 'bearer');
    expect(strict.fail('127.0.0.1', 'bearer')).to.equal(300_000);
  });
});
