import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import diagnostics from 'node:diagnostics_channel';
import { join } from 'node:path';
import { pino } from 'pino';
import { JobQueue } from '../../../src/server/jobs/job-queue.ts';
import { DomainError } from '../../../src/server/kernel/errors.ts';
import { WriterTurns } from '../../../src/server/store/writer-turns.ts';
import { acceptDeliveries, DeliveryIntake, type RawDelivery } from '../../../src/server/webhooks/deliveries.ts';
import { THREAD_RELEASED } from '../../../src/server/kernel/threads.ts';
import { WebhookThread } from '../../../src/server/webhooks/thread-client.ts';
import { DAEMON_NODE_FLAGS } from '../../../src/shared/run-args.ts';
import { waitFor } from '../../support/cli.ts';
import { freshStore } from '../../support/store.ts';

const push = (deliveryId: string, text = JSON.stringify({ ref: 'refs/heads/main', after: 'a'.repeat(40), repository: { full_name: 'acme/w' }, commits: [{}, {}] })): RawDelivery =>
  ({ event: 'push', deliveryId, hookId: '7', text, form: false });

describe('the webhook thread', () => {
  const current = freshStore();
  let thread: WebhookThread | undefined;
  afterEach(async () => {
    await thread?.stop(Date.now() + 5000);
    thread = undefined;
  });

  const start = async (path?: string, idleMs?: number) => {
    const store = current();
    const queue = new JobQueue(store, { owner: 'daemon-1' });
    const db = String((await store.get<{ file: string }>('SELECT file FROM pragma_database_list WHERE name = ?', 'main'))!.file);
    thread = new WebhookThread({
      store, queue, logger: pino({ level: 'silent' }),
      settings: () => ({ path: path ?? db, synchronous: 'normal', owner: 'daemon-1', leaseMs: 30_000, concurrency: 8 }), idleMs,
    });
    return { store, queue, thread };
  };

  it('records deliveries with their jobs, refuses a bad payload alone, and runs the jobs beside the daemon\'s worker', async () => {
    const { store, queue, thread } = await start();
    const outcomes = await thread.accept([push('d-1'), push('d-2', '{"ref": '), push('d-1'), push('d-3', '{"ref":"x"}')]);
    expect(outcomes[0]).to.include({ deliveryId: 'd-1', duplicate: false });
    expect(outcomes[1]).to.deep.equal({ refused: 'The payload is not valid JSON.' });
    expect(outcomes[2]).to.include({ deliveryId: 'd-1', duplicate: true, jobId: (outcomes[0] as { jobId: string }).jobId });
    expect((outcomes[3] as { refused: string }).refused).to.include('after (string)');
    // While the thread runs, the daemon's own worker leaves deliveries' jobs to it.
    expect(queue.takes('github.push')).to.equal(false);
    expect(queue.takes('store.prune')).to.equal(true);
    const jobId = (outcomes[0] as { jobId: string }).jobId;
    await waitFor(async () => (await queue.get(jobId))?.status === 'succeeded' || undefined, 10_000, 'the thread to run the job');
    expect((await queue.get(jobId))!.result).to.deep.equal({ repository: 'acme/w', ref: 'refs/heads/main', headCommit: 'a'.repeat(40), commits: 2 });
    expect(await store.all('SELECT job_id, hook_id, delivery_id, commit_count FROM pushes')).to.deep.equal([{ job_id: jobId, hook_id: '7', delivery_id: 'd-1', commit_count: 2 }]);
    expect((await store.get<{ n: number }>('SELECT COUNT(*) AS n FROM webhook_deliveries'))!.n).to.equal(1);
    // The daemon's thread takes turns at the write lock with the thread while it runs, and writes alone once it is gone.
    expect(store.writeLockTurns).to.be.an.instanceOf(WriterTurns);
    await thread.stop(Date.now() + 5000);
    expect(store.writeLockTurns).to.equal(undefined);
  });

  it('runs a delivery\'s job as it records it; behind a backlog, a push\'s still, an installation\'s in its turn', async () => {
    const { store, queue, thread } = await start();
    // Started, and idle: the job is finished by the time the delivery is answered, in the same commit.
    const [first] = await thread.accept([push('d-30')]) as { jobId: string }[];
    expect(await queue.get(first!.jobId)).to.include({ status: 'succeeded', attempts: 1 });
    expect(await store.get('SELECT delivery_id FROM pushes WHERE job_id = ?', first!.jobId)).to.deep.equal({ delivery_id: 'd-30' });
    // A backlog of the lane's jobs.
    const backlog = await store.transaction(async (tx) => {
      const ids: string[] = [];
      for (let n = 0; n < 3000; n++) ids.push(await queue.enqueue({ kind: 'github.ping', payload: { event: 'ping', deliveryId: 'p', hookId: null, body: {} } }, tx));
      return ids;
    });
    const installation: RawDelivery = {
      event: 'installation', deliveryId: 'd-32', hookId: '7', form: false,
      text: JSON.stringify({ action: 'created', installation: { id: 42, account: { login: 'acme' } }, repositories: [{ full_name: 'acme/w' }] }),
    };
    const [pushed, installed] = await thread.accept([push('d-31'), installation]) as { jobId: string }[];
    // A push owes no order: it is recorded with its delivery, ahead of the backlog.
    expect(await queue.get(pushed!.jobId)).to.include({ status: 'succeeded', attempts: 1 });
    expect(await store.get('SELECT delivery_id FROM pushes WHERE job_id = ?', pushed!.jobId)).to.deep.equal({ delivery_id: 'd-31' });
    // An installation event waits its turn behind the backlog.
    await waitFor(async () => (await queue.get(installed!.jobId))?.status === 'succeeded' || undefined, 20_000, 'the backlog and the installation\'s job to run');
    const started = async (id: string) => new Date((await queue.get(id))!.startedAt!).getTime();
    expect(await queue.get(backlog.at(-1)!)).to.include({ status: 'succeeded' });
    expect(await started(installed!.jobId)).to.be.at.least(await started(backlog.at(-1)!));
    expect(await started(pushed!.jobId)).to.be.below(await started(backlog.at(-1)!));
    expect(await store.all('SELECT id, account FROM installations')).to.deep.equal([{ id: 42, account: 'acme' }]);
  });

  it('that cannot start answers what it was given with a 503 to redeliver, and the daemon takes deliveries and their jobs back', async () => {
    const { store, queue, thread } = await start(join('/nonexistent', 'state.db'));
    const error = await thread.accept([push('d-9')]).then(() => undefined, (thrown: unknown) => thrown);
    expect(error).to.be.instanceOf(DomainError);
    expect(error).to.include({ kind: 'unavailable' });
    expect((error as Error).message).to.include('redeliver');
    expect(thread.available).to.equal(false);
    expect(queue.takes('github.push')).to.equal(true);
    // Nothing of it was recorded; recorded on the daemon's thread, it is a first delivery.
    expect((await acceptDeliveries(store, queue, [push('d-9')]))[0]).to.include({ duplicate: false });
  });

  it('while it starts, the daemon records deliveries itself and answers at once; once it is ready, they go to it', async () => {
    const { store, queue, thread } = await start(undefined, 300);
    const recordedHere: string[] = [];
    const here = (deliveries: RawDelivery[]) => {
      recordedHere.push(...deliveries.map((delivery) => delivery.deliveryId));
      return acceptDeliveries(store, queue, deliveries);
    };
    for (const round of ['start-up', 'after an idle stop']) {
      // Answered here, not after the thread's start: the first delivery starts it.
      const [accepted] = await thread.route([push(`${round}-1`)], here) as { jobId: string; duplicate: boolean }[];
      expect(accepted).to.include({ duplicate: false });
      expect(thread.ready, round).to.equal(false);
      await waitFor(() => thread.ready || undefined, 10_000, 'the thread to be ready');
      const next = await thread.route([push(`${round}-2`), push(`${round}-1`)], here) as { jobId: string; duplicate: boolean }[];
      expect(next[0]).to.include({ duplicate: false });
      expect(next[1]).to.include({ duplicate: true, jobId: accepted!.jobId });
      expect(recordedHere).to.deep.equal([`${round}-1`]);
      recordedHere.length = 0;
      // The job queued while the thread started runs once, with the others.
      await waitFor(async () => (await Promise.all([accepted!.jobId, next[0]!.jobId].map((id) => queue.get(id)))).every((job) => job?.status === 'succeeded') || undefined, 10_000, 'both jobs to run');
      expect((await queue.get(accepted!.jobId))!.attempts).to.equal(1);
      // Idle, the thread stops; the next delivery finds it gone.
      await waitFor(() => !thread.ready || undefined, 10_000, 'the idle thread to stop');
      await waitFor(() => queue.takes('github.push') || undefined, 10_000, 'the daemon to take its jobs back');
    }
  });

  it('takes a burst in groups of at most the daemon\'s limit, each delivery answered with its own outcome, a refused one alone', async () => {
    const { store, queue, thread } = await start();
    const sizes: number[] = [];
    const intake = new DeliveryIntake((group) => {
      sizes.push(group.length);
      return thread.accept(group);
    }, { maxGroup: 24 });
    // 50 at once, as 50 connections' deliveries read in one turn of the event loop; the 10th is malformed.
    const answers = await Promise.allSettled(Array.from({ length: 50 }, (_, index) => intake.accept(push(`b-${index}`, index === 9 ? '{"ref": ' : undefined))));
    expect(sizes).to.deep.equal([24, 24, 2]);
    answers.forEach((answer, index) => {
      if (index === 9) expect(answer.status === 'rejected' && (answer.reason as Error).message).to.equal('The payload is not valid JSON.');
      else expect(answer.status === 'fulfilled' && answer.value).to.include({ deliveryId: `b-${index}`, duplicate: false });
    });
    const jobs = answers.flatMap((answer) => (answer.status === 'fulfilled' ? [answer.value.jobId] : []));
    expect(new Set(jobs).size).to.equal(49);
    expect((await store.get<{ n: number }>('SELECT COUNT(*) AS n FROM webhook_deliveries'))!.n).to.equal(49);
    await waitFor(async () => (await Promise.all(jobs.map((id) => queue.get(id)))).every((job) => job?.status === 'succeeded') || undefined, 10_000, 'the burst\'s jobs to run');
  });

  it('stops once it has had nothing to do for a while, giving its memory back, and the next delivery starts another', async () => {
    const { queue, thread } = await start(undefined, 300);
    const released: unknown[] = [];
    const onReleased = (message: unknown) => void released.push(message);
    diagnostics.subscribe(THREAD_RELEASED, onReleased);
    const first = await thread.accept([push('d-20')]) as { jobId: string }[];
    await waitFor(async () => (await queue.get(first[0]!.jobId))?.status === 'succeeded' || undefined, 10_000, 'the job to run');
    // Retired: the daemon's worker runs every kind again, and once the thread is gone the daemon's memory reducer hears it.
    await waitFor(() => queue.takes('github.push') || undefined, 10_000, 'the idle thread to stop');
    await waitFor(() => released.length === 1 || undefined, 10_000, 'the thread to exit');
    diagnostics.unsubscribe(THREAD_RELEASED, onReleased);
    expect(released).to.deep.equal([{ thread: 'webhooks' }]);
    const second = await thread.accept([push('d-21'), push('d-20')]) as { jobId: string; duplicate: boolean }[];
    expect(second[1]).to.include({ duplicate: true, jobId: first[0]!.jobId });
    expect(queue.takes('github.push')).to.equal(false);
    await waitFor(async () => (await queue.get(second[0]!.jobId))?.status === 'succeeded' || undefined, 10_000, 'the new thread to run the job');
  });

  it('gets a young generation twice the daemon\'s, and leaves the daemon\'s cap as it was; a cap of the user\'s own applies to both', () => {
    // The largest the young generation of a worker's isolate grows to, under allocation that keeps some alive; started
    // through the thread's own start, then a plain one after it.
    const client = new URL('../../../src/server/webhooks/thread-client.ts', import.meta.url).href;
    const script = `
      import { Worker } from 'node:worker_threads';
      import { startWithThreadHeap } from ${JSON.stringify(client)};
      const code = "const v8 = require('node:v8'); const ring = new Array(3000); let max = 0;" +
        "for (let i = 0; i < 200000; i++) { ring[i % 3000] = new Array(64).fill(i);" +
        "if (i % 1000 === 0) max = Math.max(max, v8.getHeapSpaceStatistics().find((space) => space.space_name === 'new_space').space_size); }" +
        "require('node:worker_threads').parentPort.postMessage(max / 1048576);";
      const largest = (worker) => new Promise((resolve) => worker.once('message', resolve));
      const thread = await largest(startWithThreadHeap(() => new Worker(code, { eval: true, execArgv: [] })));
      const plain = await largest(new Worker(code, { eval: true, execArgv: [] }));
      process.stdout.write(JSON.stringify({ thread, plain }));
    `;
    const run = (flags: readonly string[]) => {
      const child = spawnSync(process.execPath, [...flags, '--input-type=module', '-e', script], { encoding: 'utf8' });
      expect(child.status, child.stderr).to.equal(0);
      return JSON.parse(child.stdout) as { thread: number; plain: number };
    };
    expect(run(DAEMON_NODE_FLAGS)).to.deep.equal({ thread: 32, plain: 16 });
    const own = DAEMON_NODE_FLAGS.map((flag) => (flag.startsWith('--max-semi-space-size=') ? '--max-semi-space-size=4' : flag));
    expect(run(own)).to.deep.equal({ thread: 8, plain: 8 });
  });
});
