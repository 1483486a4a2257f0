import { expect } from 'chai';
import { FirstRecords } from '../../../../src/server/agents/first-records.ts';

describe('agents: a run\'s first records', () => {
  it('are written once, however often they are asked for', async () => {
    let writes = 0;
    const records = new FirstRecords(async () => void writes++);
    await Promise.all([records.begin(), records.begin()]);
    await records.begin();
    expect(writes).to.equal(1);
    expect(records.signal.aborted).to.equal(false);
    expect(records.failure).to.equal(undefined);
  });

  it('a failed write stops the run: every caller gets the failure, and the signal aborts with it', async () => {
    const records = new FirstRecords(async () => { throw 'disk full'; });
    const failure = await records.begin().catch((error: unknown) => error);
    expect(failure).to.be.instanceOf(Error).with.property('message', 'disk full');
    expect(await records.begin().catch((error: unknown) => error)).to.equal(failure);
    expect(records.failure).to.equal(failure);
    expect(records.signal.reason).to.equal(failure);
  });

  it('written soon: at the next turn for 0, after the delay otherwise, a failure taken in', async () => {
    const written: string[] = [];
    const now = new FirstRecords(async () => void written.push('now'));
    const later = new FirstRecords(async () => void written.push('later'));
    now.soon(0);
    later.soon(20);
    expect(written).to.deep.equal([]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(written).to.deep.equal(['now']);
    await new Promise((resolve) => setTimeout(resolve, 40));
    expect(written).to.deep.equal(['now', 'later']);
    const failing = new FirstRecords(async () => { throw new Error('no'); });
    failing.soon(0);
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(failing.signal.aborted).to.equal(true);
  });
});
