import { expect } from 'chai';
import { JobQueue } from '../../../src/server/jobs/job-queue.ts';
import type { Store } from '../../../src/server/store/database.ts';
import { freshStore } from '../../support/store.ts';

for (const engine of ['sqlite', 'postgres'] as const) describe(`job queue (${engine})`, () => {
  const current = freshStore(engine);
  let store: Store;
  let now: number;
  let queue: JobQueue;
  beforeEach(() => {
    store = current();
    now = 1_000_000;
    queue = new JobQueue(store, { now: () => now });
  });

  it('retries a failed attempt with doubling backoff until its attempts run out', () => {
    const id = queue.enqueue('k', { a: 1 }, { maxAttempts: 3 });
    const [first] = queue.claim();
    expect(first).to.include({ id, attempts: 1 });
    expect(first!.payload).to.deep.equal({ a: 1 });
    expect(queue.claim()).to.deep.equal([]);
    queue.fail(first, 'boom');
    expect(queue.get(id)).to.include({ status: 'queued', error: 'boom' });
    expect(queue.claim()).to.deep.equal([]);
    now += 1000;
    const [second] = queue.claim();
    expect(second.attempts).to.equal(2);
    queue.fail(second, 'boom');
    now += 1999;
    expect(queue.claim()).to.deep.equal([]);
    now += 1;
    const [third] = queue.claim();
    queue.fail(third, 'final');
    expect(queue.get(id)).to.include({ status: 'failed', attempts: 3, error: 'final' });
    expect(queue.retry(id)).to.include({ status: 'queued', attempts: 0 });
    expect(queue.retry('job_nope')).to.equal(undefined);
  });

  it('keeps parsed payloads only for the jobs the worker takes next: a backlog is read from the store, never held', () => {
    // The parsed object stands for what the intake already had; what is stored is the serialized copy.
    const ids = Array.from({ length: 2000 }, (_, n) => queue.enqueue('k', null, { serialized: JSON.stringify({ n, from: 'store' }), parsed: { n, from: 'memory' } }));
    const taken = queue.claim(2000);
    expect(taken.map((job) => job.id)).to.deep.equal(ids);
    const from = taken.map((job) => (job.payload as { from: string }).from);
    expect(from.filter((where) => where === 'memory')).to.have.length(512);
    expect(from.slice(0, 512).every((where) => where === 'memory')).to.equal(true);
    expect(from.slice(512).every((where) => where === 'store')).to.equal(true);
    // Once the backlog is taken, new jobs are kept parsed again.
    queue.enqueue('k', null, { serialized: '{"from":"store"}', parsed: { from: 'memory' } });
    expect(queue.claim()[0]!.payload).to.deep.equal({ from: 'memory' });
    // A job not yet due is read from the store when it is (its parsed copy is let go once the queue is drained).
    queue.enqueue('k', null, { serialized: '{"from":"store"}', parsed: { from: 'memory' }, runAt: now + 1000 });
    expect(queue.claim()).to.deep.equal([]);
    now += 1000;
    expect(queue.claim()[0]!.payload).to.deep.equal({ from: 'store' });
  });

  it('takes only the kinds of its lane, while another worker of the daemon runs the others', () => {
    const push = queue.enqueue('github.push', null);
    const other = queue.enqueue('store.prune', null);
    const lookalike = queue.enqueue('githubx.push', null);
    const webhooks = new JobQueue(store, { now: () => now, lane: { under: 'github.' } });
    queue.useLane({ outside: 'github.' });
    expect([queue.takes('github.push'), queue.takes('store.prune'), webhooks.takes('github.push'), webhooks.takes('githubx.push')]).to.deep.equal([false, true, true, false]);
    expect(queue.claim(10).map((job) => job.id)).to.deep.equal([other, lookalike]);
    expect(webhooks.claim(10).map((job) => job.id)).to.deep.equal([push]);
    const later = queue.enqueue('github.issues', null, { runAt: now + 5000 });
    expect(webhooks.nextRunAt()).to.equal(now + 5000);
    expect(queue.nextRunAt()).to.equal(undefined);
    // Back to one worker for every kind (the other stopped).
    queue.useLane(undefined);
    now += 5000;
    expect(queue.claim(10).map((job) => job.id)).to.deep.equal([later]);
    expect(() => new JobQueue(store, { lane: { under: "x'; DROP TABLE jobs; --." } })).to.throw(/lane/);
  });

  it('requeues jobs a killed daemon left running', () => {
    queue.enqueue('k', null);
    queue.claim();
    expect(queue.requeueInterrupted({ all: true })).to.equal(1);
    expect(queue.claim()[0]?.attempts).to.equal(2);
  });

  it('leases a claim to one daemon: renewed while it runs, taken back when it lapses, and a late outcome is not recorded', () => {
    const other = new JobQueue(store, { owner: 'other', now: () => now });
    const id = queue.enqueue('k', null);
    const [job] = queue.claim();
    expect(other.claim()).to.deep.equal([]);
    now += queue.leaseMs - 1;
    expect(other.requeueInterrupted()).to.equal(0);
    expect(queue.renewLeases()).to.equal(1);
    now += queue.leaseMs - 1;
    expect(other.requeueInterrupted()).to.equal(0);
    now += 2;
    // The daemon stalled past its lease: another takes the job back and runs it.
    expect(other.requeueInterrupted()).to.equal(1);
    const [again] = other.claim();
    expect(again).to.include({ id, attempts: 2 });
    expect(queue.succeed(job!.id, 'late')).to.equal(false);
    expect(queue.get(id)).to.include({ status: 'running' });
    expect(other.succeed(id, 'done')).to.equal(true);
    expect(queue.get(id)).to.include({ status: 'succeeded', result: 'done' });
  });

  it('prunes finished jobs and deliveries past the retention', () => {
    const old = queue.enqueue('k', null);
    queue.succeed(queue.claim()[0]!.id, 1);
    store.engine.prepare("INSERT INTO webhook_deliveries (hook_id, delivery_id, event, received_at, job_id) VALUES ('', 'd', 'push', ?, ?)").run(now, old);
    now += 31 * 86_400_000;
    const fresh = queue.enqueue('k', null);
    expect(queue.prune(30)).to.deep.equal({ jobs: 1, deliveries: 1 });
    expect(queue.get(old)).to.equal(undefined);
    expect(queue.get(fresh)?.status).to.equal('queued');
  });
});
