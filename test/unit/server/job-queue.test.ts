import { expect } from 'chai';
import { DatabaseSync } from 'node:sqlite';
import { pino } from 'pino';
import { JobQueue } from '../../../src/server/jobs/job-queue.ts';
import { JobWorker } from '../../../src/server/jobs/worker.ts';
import type { JobHandler } from '../../../src/server/kernel/module.ts';
import type { Store } from '../../../src/server/store/database.ts';
import type { SqliteEngine } from '../../../src/server/store/sqlite-engine.ts';
import { freshStore } from '../../support/store.ts';
import { waitFor } from '../../support/cli.ts';

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

  it('records a first attempt made as the job is queued: its outcome and its writes commit with it, or only the failure does', async () => {
    store.prepare('CREATE TABLE scratch (v TEXT NOT NULL)').run();
    let release!: () => void;
    const handlers: Record<string, JobHandler> = {
      ok: (payload, { store: db }) => {
        db.prepare('INSERT INTO scratch (v) VALUES (?)').run(`ok ${(payload as { n: number }).n}`);
        return { done: (payload as { n: number }).n };
      },
      boom: (_payload, { store: db }) => {
        db.prepare('INSERT INTO scratch (v) VALUES (?)').run('undone');
        throw new Error('boom');
      },
      later: () => new Promise<string>((resolve) => { release = () => resolve('finished'); }),
    };
    const worker = new JobWorker({ queue, store, logger: pino({ level: 'silent' }), concurrency: 4, handler: (kind) => handlers[kind], requeueAtStart: false });
    const queueNow = (kind: string, n: number, maxAttempts?: number) => store.transaction(() => {
      const id = queue.newId();
      const ran = worker.runNow({ id, kind, payload: { n } });
      return queue.enqueue(kind, { n }, { id, ran, maxAttempts });
    });
    const ok = queueNow('ok', 1);
    expect(queue.get(ok)).to.include({ status: 'succeeded', attempts: 1, error: null });
    expect(queue.get(ok)!.result).to.deep.equal({ done: 1 });
    // Nothing is left for a worker to claim, and no payload is kept: nothing would read it again.
    expect(queue.claim(10)).to.deep.equal([]);
    expect(store.prepare('SELECT job_id FROM job_payloads WHERE job_id = ?').get(ok)).to.equal(undefined);

    const boom = queueNow('boom', 2);
    expect(queue.get(boom)).to.include({ status: 'queued', attempts: 1, error: 'boom' });
    expect(new Date(queue.get(boom)!.runAt).getTime()).to.equal(now + 1000);
    const fatal = queueNow('boom', 3, 1);
    expect(queue.get(fatal)).to.include({ status: 'failed', attempts: 1, error: 'boom' });
    // The failed attempts' writes were undone with them; the job that succeeded kept its own.
    expect(store.prepare('SELECT v FROM scratch').all()).to.deep.equal([{ v: 'ok 1' }]);
    // The retry is the second attempt, after the backoff.
    now += 1000;
    expect(queue.claim(10).map((job) => [job.id, job.attempts, job.payload])).to.deep.equal([[boom, 2, { n: 2 }]]);

    // A handler that goes asynchronous leaves its job running, claimed by this daemon, until it finishes.
    const later = queueNow('later', 4);
    expect(queue.get(later)).to.include({ status: 'running', attempts: 1 });
    expect(worker.active).to.equal(1);
    release();
    for (let i = 0; i < 50 && queue.get(later)!.status === 'running'; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(queue.get(later)).to.include({ status: 'succeeded' });
    expect(queue.get(later)!.result).to.equal('finished');
    // A kind without a handler is queued as usual.
    expect(worker.runNow({ id: queue.newId(), kind: 'nobody', payload: null })).to.equal(undefined);
  });

  it('tells whether a job of its lane is due', () => {
    const webhooks = new JobQueue(store, { now: () => now, lane: { under: 'github.' } });
    queue.enqueue('store.prune', null);
    expect(webhooks.hasDue()).to.equal(false);
    queue.enqueue('github.push', null, { runAt: now + 10 });
    expect(webhooks.hasDue()).to.equal(false);
    now += 10;
    expect(webhooks.hasDue()).to.equal(true);
    webhooks.claim(1);
    expect(webhooks.hasDue()).to.equal(false);
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

describe('a worker that gives way to its thread\'s other work (sqlite)', () => {
  const current = freshStore('sqlite');

  it('claims nothing while that work waits and looks again when it is resumed; claims small groups while that work comes', async () => {
    const store = current();
    const queue = new JobQueue(store);
    let waiting = true;
    let claim = 2;
    const worker = new JobWorker({
      queue, store, logger: pino({ level: 'silent' }), concurrency: 8, requeueAtStart: false,
      handler: () => () => 'done',
      yieldTo: () => ({ waiting, claim }),
    });
    // The groups the worker takes, by their sizes (each group is one claim and one commit).
    const groups: number[] = [];
    const take = queue.claim.bind(queue);
    queue.claim = (limit) => {
      const taken = take(limit);
      if (taken.length > 0) groups.push(taken.length);
      return taken;
    };
    const ids = Array.from({ length: 7 }, (_, n) => queue.enqueue('k', { n }));
    worker.start();
    await new Promise((resolve) => setTimeout(resolve, 50));
    // The other work waits: not a job was taken, though all were due.
    expect(ids.map((id) => queue.get(id)!.status)).to.deep.equal(Array(7).fill('queued'));
    // It has run and still comes: the worker looks again at once, in groups of two.
    waiting = false;
    worker.resume();
    await waitFor(() => ids.every((id) => queue.get(id)!.status === 'succeeded'), 5000, 'the jobs to run');
    expect(groups).to.deep.equal([2, 2, 2, 1]);
    // Once it has stopped coming, groups are as large as the worker's concurrency again.
    groups.length = 0;
    claim = 8;
    const more = Array.from({ length: 9 }, (_, n) => queue.enqueue('k', { n }));
    await waitFor(() => more.every((id) => queue.get(id)!.status === 'succeeded'), 5000, 'the next jobs to run');
    expect(groups).to.deep.equal([8, 1]);
    // A resume with nothing given way to does nothing.
    worker.resume();
    expect(await worker.drain(1000)).to.equal(0);
  });
});

describe('a first attempt on a full disk (sqlite)', () => {
  const current = freshStore('sqlite');

  it('fails the whole transaction, never writing the job on its own', () => {
    const store = current();
    const queue = new JobQueue(store);
    store.prepare('CREATE TABLE scratch (v TEXT NOT NULL)').run();
    const db = (store.engine as SqliteEngine).db;
    const pages = Number((db.prepare('PRAGMA page_count').get() as { page_count: number }).page_count);
    // Room for a job, not for what the handler writes: SQLite rolls the whole transaction back by itself.
    db.exec(`PRAGMA max_page_count = ${pages + 4}`);
    const worker = new JobWorker({
      queue, store, logger: pino({ level: 'silent' }), concurrency: 1, requeueAtStart: false,
      handler: () => (_payload, { store: db2 }) => db2.prepare('INSERT INTO scratch (v) VALUES (?)').run('x'.repeat(200_000)),
    });
    const id = queue.newId();
    expect(() => store.transaction(() => {
      const ran = worker.runNow({ id, kind: 'big', payload: null });
      queue.enqueue('big', null, { id, ran });
    })).to.throw(/full/);
    expect(queue.get(id)).to.equal(undefined);
    expect(store.transactionLost).to.equal(false);
  });
});

describe('a database that goes away between a group and the next look (sqlite)', () => {
  const current = freshStore('sqlite');

  it('finishes what it took, says so once, and looks again later instead of throwing', async () => {
    const store = current();
    const queue = new JobQueue(store);
    // As PostgreSQL answers a restart: the group committed, the read after it fails.
    let failures = 1;
    const nextRunAt = queue.nextRunAt.bind(queue);
    queue.nextRunAt = () => {
      if (failures-- > 0) throw new Error('terminating connection due to administrator command');
      return nextRunAt();
    };
    const warnings: string[] = [];
    const logger = pino({ level: 'warn' }, { write: (line: string) => void warnings.push(JSON.parse(line).msg) });
    const worker = new JobWorker({ queue, store, logger, concurrency: 1, requeueAtStart: false, handler: () => () => 'done' });
    const id = queue.enqueue('k', null);
    worker.start();
    expect(queue.get(id)).to.include({ status: 'succeeded', attempts: 1 });
    expect(warnings).to.deep.equal(['jobs cannot be written; retrying']);
    const later = queue.enqueue('k', null);
    await waitFor(() => queue.get(later)?.status === 'succeeded', 5000, 'the worker to look again');
    expect(await worker.drain(1000)).to.equal(0);
  });
});

describe('an idle worker while another connection writes (sqlite)', () => {
  const current = freshStore('sqlite');

  it('looks for due jobs without waiting on the write lock, and runs a job once one is queued', async () => {
    const store = current();
    const queue = new JobQueue(store);
    const warnings: string[] = [];
    const logger = pino({ level: 'warn' }, { write: (line: string) => void warnings.push(JSON.parse(line).msg) });
    const worker = new JobWorker({ queue, store, logger, concurrency: 1, requeueAtStart: false, handler: () => () => 'done' });
    // Another thread of the daemon in the middle of its commits: it holds the database's one write lock.
    const other = new DatabaseSync((store.engine as SqliteEngine).db.location()!);
    other.exec('BEGIN IMMEDIATE');
    try {
      // A look that found nothing due took no lock: it neither waited out the busy timeout nor failed.
      worker.start();
      expect(warnings).to.deep.equal([]);
    } finally {
      other.exec('COMMIT');
      other.close();
    }
    const id = queue.enqueue('k', null);
    await waitFor(() => queue.get(id)?.status === 'succeeded', 5000, 'the worker to run the job');
    expect(await worker.drain(1000)).to.equal(0);
  });
});
