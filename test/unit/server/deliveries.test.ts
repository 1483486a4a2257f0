import { expect } from 'chai';
import { pino } from 'pino';
import { JobQueue } from '../../../src/server/jobs/job-queue.ts';
import { JobWorker } from '../../../src/server/jobs/worker.ts';
import { TableBuilder } from '../../../src/server/kernel/registry.ts';
import type { Store } from '../../../src/server/store/database.ts';
import { acceptDeliveries, type RawDelivery } from '../../../src/server/webhooks/deliveries.ts';
import { registerGithubHandlers } from '../../../src/server/webhooks/github-handlers.ts';
import { freshStore } from '../../support/store.ts';

const push = (deliveryId: string, hookId = '7'): RawDelivery => ({
  event: 'push', deliveryId, hookId, form: false,
  text: JSON.stringify({ ref: 'refs/heads/main', after: 'a'.repeat(40), repository: { full_name: 'acme/w' }, commits: [{}] }),
});
const installation = (deliveryId: string): RawDelivery => ({
  event: 'installation', deliveryId, hookId: '7', form: false,
  text: JSON.stringify({ action: 'created', installation: { id: 42, account: { login: 'acme' } }, repositories: [{ full_name: 'acme/w' }] }),
});

for (const engine of ['sqlite', 'postgres'] as const) describe(`webhook deliveries recorded with their jobs (${engine})`, () => {
  const current = freshStore(engine);
  let store: Store;
  let queue: JobQueue;
  let worker: JobWorker;
  beforeEach(() => {
    store = current();
    queue = new JobQueue(store);
    const table = new TableBuilder({ reservedPaths: () => [], compileSchema: () => undefined });
    registerGithubHandlers(table.api('webhooks', pino({ level: 'silent' }), true).jobs);
    worker = new JobWorker({ queue, store, logger: pino({ level: 'silent' }), concurrency: 4, handler: (kind) => table.table.jobHandler(kind)?.value, requeueAtStart: false });
  });
  const count = async (sql: string) => Number((await store.get<{ n: number }>(sql))!.n);

  it('records a group at once: a push done in the delivery\'s own commit, an installation queued in its turn, a key twice answered as one', async () => {
    const outcomes = await acceptDeliveries(store, queue, [push('d-1'), installation('d-2'), push('d-1'), push('d-1', '8')], (jobs, tx) => worker.runAtOnce(jobs, tx));
    const [first, installed, again, otherHook] = outcomes as { jobId: string; duplicate: boolean }[];
    expect(again).to.include({ duplicate: true, jobId: first!.jobId });
    expect(otherHook).to.include({ duplicate: false });
    expect(otherHook!.jobId).to.not.equal(first!.jobId);
    expect(await queue.get(first!.jobId)).to.include({ status: 'succeeded', attempts: 1 });
    expect((await queue.get(first!.jobId))!.result).to.deep.include({ repository: 'acme/w', commits: 1 });
    expect(await store.get('SELECT delivery_id, hook_id FROM pushes WHERE job_id = ?', first!.jobId)).to.deep.equal({ delivery_id: 'd-1', hook_id: '7' });
    // Ordered kinds wait their turn: queued, their payload kept.
    expect(await queue.get(installed!.jobId)).to.include({ status: 'queued', attempts: 0 });
    expect(await count('SELECT COUNT(*) AS n FROM job_payloads')).to.equal(1);
    expect(await count('SELECT COUNT(*) AS n FROM webhook_deliveries')).to.equal(3);
    // A redelivery later is a duplicate too, and runs nothing again.
    const [later] = await acceptDeliveries(store, queue, [push('d-1')], (jobs, tx) => worker.runAtOnce(jobs, tx)) as { jobId: string; duplicate: boolean }[];
    expect(later).to.include({ duplicate: true, jobId: first!.jobId });
    expect(await count('SELECT COUNT(*) AS n FROM pushes')).to.equal(2);
  });

  it('records a group again without running anything when a first attempt fails it, and the jobs run in their turn', async () => {
    const failing = async () => {
      throw new Error('a handler failed at once');
    };
    const outcomes = await acceptDeliveries(store, queue, [push('d-10'), push('d-11')], failing) as { jobId: string; duplicate: boolean }[];
    for (const outcome of outcomes) {
      expect(outcome.duplicate).to.equal(false);
      expect(await queue.get(outcome.jobId)).to.include({ status: 'queued', attempts: 0 });
    }
    expect(await count('SELECT COUNT(*) AS n FROM webhook_deliveries')).to.equal(2);
    const claimed = await queue.claim(10);
    expect(claimed.map((job) => job.id).sort()).to.deep.equal(outcomes.map((outcome) => outcome.jobId).sort());
  });
});
