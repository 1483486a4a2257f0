import { expect } from 'chai';
import { JobQueue } from '../../../../src/server/jobs/job-queue.ts';
import { PRUNE_INTERVAL_MS, PRUNE_JOB, Retention } from '../../../../src/server/jobs/retention.ts';
import { freshStore } from '../../../support/store.ts';

describe('jobs: the retention job', () => {
  const store = freshStore();
  let now: number;
  const queued = async () => (await new JobQueue(store()).list({ kind: PRUNE_JOB })).jobs.length;
  beforeEach(() => {
    now = Date.parse('2026-03-01T00:00:00Z');
  });

  it('is queued once per interval, however often a daemon starts or looks', async () => {
    const retention = new Retention(store(), new JobQueue(store()), () => now);
    expect(await retention.queueIfDue()).to.equal(true);
    expect(await retention.queueIfDue()).to.equal(false);
    now += PRUNE_INTERVAL_MS - 1;
    expect(await new Retention(store(), new JobQueue(store()), () => now).queueIfDue(), 'a daemon started again').to.equal(false);
    now += 1;
    expect(await retention.queueIfDue()).to.equal(true);
    expect(await queued()).to.equal(2);
  });

  it('of daemons sharing the store that look at once, one queues it', async () => {
    const daemons = [1, 2, 3].map(() => new Retention(store(), new JobQueue(store()), () => now));
    const won = await Promise.all(daemons.map((daemon) => daemon.queueIfDue()));
    expect(won.filter(Boolean)).to.have.length(1);
    expect(await queued()).to.equal(1);
  });

  it('prunes old jobs and asks each module to prune what is older than the retention', async () => {
    const asked: [string, number][] = [];
    const retention = new Retention(store(), new JobQueue(store()), () => now);
    retention.add('deliveries', async (ms) => { asked.push(['deliveries', ms]); return 3; });
    retention.add('agentRuns', async (ms) => { asked.push(['agentRuns', ms]); return 0; });
    retention.add('deliveries', async (ms) => { asked.push(['deliveries again', ms]); return 4; });
    expect(await retention.prune(2)).to.deep.equal({ jobs: 0, deliveries: 4, agentRuns: 0 });
    expect(asked).to.deep.equal([['deliveries again', 172_800_000], ['agentRuns', 172_800_000]]);
  });
});
