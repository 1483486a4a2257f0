import { expect } from 'chai';
import { DatabaseSync } from 'node:sqlite';
import { pino } from 'pino';
import { JobQueue } from '../../../src/server/jobs/job-queue.ts';
import { JobWorker } from '../../../src/server/jobs/worker.ts';
import type { JobHandler, JobKind } from '../../../src/server/kernel/module.ts';
import type { Store } from '../../../src/server/store/database.ts';
import { freshStore } from '../../support/store.ts';
import { waitFor } from '../../support/cli.ts';
import { daemonApplicationName } from '../../../src/shared/store-url.ts';

/** A handler table as the daemon's holds it: store-only handlers unless said otherwise. */
const kinds = (handlers: Record<string, JobHandler>, own: string[] = []) => (kind: string): JobKind | undefined =>
  handlers[kind] && { run: handlers[kind], transactional: !own.includes(kind) };

/** The file of a SQLite store, to open a second connection to it. */
const fileOf = async (store: Store) => String((await store.get<{ file: string }>('SELECT file FROM pragma_database_list WHERE name = ?', 'main'))!.file);

for (const engine of ['sqlite', 'postgres'] as const) describe(`job queue (${engine})`, () => {
  // The store's sessions are those of a daemon whose instance id is 'local', the queue's owner unless told otherwise.
  const current = freshStore(engine, { applicationName: daemonApplicationName('test', 'local') });
  let store: Store;
  let now: number;
  let queue: JobQueue;
  beforeEach(() => {
    store = current();
    now = 1_000_000;
    queue = new JobQueue(store, { now: () => now });
  });

  it('retries a failed attempt with doubling backoff until its attempts run out', async () => {
    const id = await queue.enqueue({ kind: 'k', payload: { a: 1 }, maxAttempts: 3 });
    const [first] = await queue.claim();
    expect(first).to.include({ id, attempts: 1 });
    expect(first!.payload).to.deep.equal({ a: 1 });
    expect(await queue.claim()).to.deep.equal([]);
    await queue.fail(first!, 'boom');
    expect(await queue.get(id)).to.include({ status: 'queued', error: 'boom' });
    expect(await queue.claim()).to.deep.equal([]);
    now += 1000;
    const [second] = await queue.claim();
    expect(second!.attempts).to.equal(2);
    await queue.fail(second!, 'boom');
    now += 1999;
    expect(await queue.claim()).to.deep.equal([]);
    now += 1;
    const [third] = await queue.claim();
    await queue.fail(third!, 'final');
    expect(await queue.get(id)).to.include({ status: 'failed', attempts: 3, error: 'final' });
    expect(await queue.retry(id)).to.include({ status: 'queued', attempts: 0 });
    expect(await queue.retry(id)).to.equal('not-failed');
    expect(await queue.retry('job_nope')).to.equal(undefined);
  });

  it('keeps parsed payloads only for the jobs the worker takes next: a backlog is read from the store, never held', async () => {
    // The parsed object stands for what the intake already had; what is stored is the serialized copy.
    const ids: string[] = [];
    for (let n = 0; n < 2000; n++) ids.push(await queue.enqueue({ kind: 'k', serialized: JSON.stringify({ n, from: 'store' }), parsed: { n, from: 'memory' } }));
    const taken = await queue.claim(2000);
    expect(taken.map((job) => job.id)).to.deep.equal(ids);
    const from = taken.map((job) => (job.payload as { from: string }).from);
    expect(from.filter((where) => where === 'memory')).to.have.length(512);
    expect(from.slice(0, 512).every((where) => where === 'memory')).to.equal(true);
    expect(from.slice(512).every((where) => where === 'store')).to.equal(true);
    // Once the backlog is taken, new jobs are kept parsed again.
    await queue.enqueue({ kind: 'k', serialized: '{"from":"store"}', parsed: { from: 'memory' } });
    expect((await queue.claim())[0]!.payload).to.deep.equal({ from: 'memory' });
    // A job not yet due is read from the store when it is (its parsed copy is let go once the queue is drained).
    await queue.enqueue({ kind: 'k', serialized: '{"from":"store"}', parsed: { from: 'memory' }, runAt: now + 1000 });
    expect(await queue.claim()).to.deep.equal([]);
    now += 1000;
    expect((await queue.claim())[0]!.payload).to.deep.equal({ from: 'store' });
  });

  it('takes only the kinds of its lane, while another worker of the daemon runs the others', async () => {
    const push = await queue.enqueue({ kind: 'github.push', payload: null });
    const other = await queue.enqueue({ kind: 'store.prune', payload: null });
    const lookalike = await queue.enqueue({ kind: 'githubx.push', payload: null });
    const webhooks = new JobQueue(store, { now: () => now, lane: { under: 'github.' } });
    queue.useLane({ outside: 'github.' });
    expect([queue.takes('github.push'), queue.takes('store.prune'), webhooks.takes('github.push'), webhooks.takes('githubx.push')]).to.deep.equal([false, true, true, false]);
    expect((await queue.claim(10)).map((job) => job.id)).to.deep.equal([other, lookalike]);
    expect((await webhooks.claim(10)).map((job) => job.id)).to.deep.equal([push]);
    const later = await queue.enqueue({ kind: 'github.issues', payload: null, runAt: now + 5000 });
    expect(await webhooks.nextRunAt()).to.equal(now + 5000);
    expect(await queue.nextRunAt()).to.equal(undefined);
    // Back to one worker for every kind (the other stopped).
    queue.useLane(undefined);
    now += 5000;
    expect((await queue.claim(10)).map((job) => job.id)).to.deep.equal([later]);
    expect(() => new JobQueue(store, { lane: { under: "x'; DROP TABLE jobs; --." } })).to.throw(/lane/);
  });

  it('makes a first attempt as the job is queued: its outcome and its writes commit with it; a failure is the attempt\'s on SQLite, the transaction\'s on PostgreSQL', async () => {
    await store.transaction((tx) => tx.exec('CREATE TABLE scratch (v TEXT NOT NULL)'));
    const handlers: Record<string, JobHandler> = {
      ok: async (payload, { db }) => {
        await db.run('INSERT INTO scratch (v) VALUES (?)', `ok ${(payload as { n: number }).n}`);
        return { done: (payload as { n: number }).n };
      },
      boom: async (_payload, { db }) => {
        await db.run('INSERT INTO scratch (v) VALUES (?)', 'undone');
        throw new Error('boom');
      },
      elsewhere: () => 'not now',
    };
    const worker = new JobWorker({ queue, store, logger: pino({ level: 'silent' }), concurrency: 4, handler: kinds(handlers, ['elsewhere']), requeueAtStart: false });
    const queueNow = (kind: string, n: number, maxAttempts?: number) => store.transaction(async (tx) => {
      const id = queue.newId();
      const ran = (await worker.runAtOnce([{ id, kind, payload: { n } }], tx)).get(id);
      return queue.enqueue({ id, kind, payload: { n }, ran, maxAttempts }, tx);
    });
    const ok = await queueNow('ok', 1);
    expect(await queue.get(ok)).to.include({ status: 'succeeded', attempts: 1, error: null });
    expect((await queue.get(ok))!.result).to.deep.equal({ done: 1 });
    // Nothing is left for a worker to claim, and no payload is kept: nothing would read it again.
    expect(await queue.claim(10)).to.deep.equal([]);
    expect(await store.get('SELECT job_id FROM job_payloads WHERE job_id = ?', ok)).to.equal(undefined);

    if (engine === 'sqlite') {
      const boom = await queueNow('boom', 2);
      expect(await queue.get(boom)).to.include({ status: 'queued', attempts: 1, error: 'boom' });
      expect(new Date((await queue.get(boom))!.runAt).getTime()).to.equal(now + 1000);
      const fatal = await queueNow('boom', 3, 1);
      expect(await queue.get(fatal)).to.include({ status: 'failed', attempts: 1, error: 'boom' });
      // The retry is the second attempt, after the backoff.
      now += 1000;
      expect((await queue.claim(10)).map((job) => [job.id, job.attempts, job.payload])).to.deep.equal([[boom, 2, { n: 2 }]]);
    } else {
      // Handlers run side by side there, without a savepoint each: a failing one fails the whole transaction.
      await queueNow('boom', 2).then(() => expect.fail('committed a failed attempt'), (error: Error) => expect(error.message).to.equal('boom'));
      expect((await store.get<{ n: number }>('SELECT COUNT(*) AS n FROM jobs'))!.n).to.equal(1);
    }
    // The failed attempts' writes were undone with them; the job that succeeded kept its own.
    expect(await store.all('SELECT v FROM scratch')).to.deep.equal([{ v: 'ok 1' }]);

    // A handler that does more than touch the store is never run inside a transaction: its job is queued as usual.
    const elsewhere = await queueNow('elsewhere', 4);
    expect(await queue.get(elsewhere)).to.include({ status: 'queued', attempts: 0 });
    // So is a kind without a handler.
    const none = await store.transaction((tx) => worker.runAtOnce([{ id: 'job_x', kind: 'nobody', payload: null }], tx));
    expect(none.size).to.equal(0);
  });

  it('tells the worker of a job queued in a transaction once it has committed, and never of one rolled back', async () => {
    let told = 0;
    queue.onEnqueued(() => told++);
    await store.transaction(async (tx) => {
      await queue.enqueue({ kind: 'k', payload: null }, tx);
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(told, 'before the commit').to.equal(0);
    });
    await new Promise((resolve) => setImmediate(resolve));
    expect(told).to.equal(1);
    await store.transaction(async (tx) => {
      await queue.enqueue({ kind: 'k', payload: null }, tx);
      throw new Error('changed my mind');
    }).catch(() => undefined);
    await new Promise((resolve) => setImmediate(resolve));
    expect(told).to.equal(1);
    expect((await store.get<{ n: number }>('SELECT COUNT(*) AS n FROM jobs'))!.n).to.equal(1);
  });

  it('runs store-only handlers of a group together and the others on their own, recording every outcome', async () => {
    now = Date.now();
    let release!: () => void;
    const handlers: Record<string, JobHandler> = {
      quick: async (payload, { db }) => (await db.get<{ n: number }>('SELECT COUNT(*) AS n FROM jobs'))!.n >= 0 && payload,
      broken: () => {
        throw new Error('no');
      },
      slow: () => new Promise<string>((resolve) => { release = () => resolve('finished'); }),
    };
    const worker = new JobWorker({ queue, store, logger: pino({ level: 'silent' }), concurrency: 8, handler: kinds(handlers, ['slow']), requeueAtStart: false });
    const slow = await queue.enqueue({ kind: 'slow', payload: null });
    const quick = await Promise.all([1, 2, 3].map((n) => queue.enqueue({ kind: 'quick', payload: { n } })));
    const broken = await queue.enqueue({ kind: 'broken', payload: null, maxAttempts: 1 });
    const nobody = await queue.enqueue({ kind: 'nobody', payload: null });
    await worker.start();
    await waitFor(async () => (await Promise.all(quick.map((id) => queue.get(id)))).every((job) => job?.status === 'succeeded'), 5000, 'the quick jobs');
    expect((await queue.get(quick[1]!))!.result).to.deep.equal({ n: 2 });
    expect(await queue.get(broken)).to.include({ status: 'failed', error: 'no' });
    expect(await queue.get(nobody)).to.include({ status: 'failed', error: 'no handler for job kind nobody' });
    // The handler that waits for something else holds its job running, claimed, until it is done.
    expect(await queue.get(slow)).to.include({ status: 'running' });
    expect(worker.active).to.equal(1);
    release();
    await waitFor(async () => (await queue.get(slow))?.status === 'succeeded', 5000, 'the slow job');
    expect((await queue.get(slow))!.result).to.equal('finished');
    expect(await worker.drain(1000)).to.equal(0);
  });

  it('tells whether a job of its lane is due', async () => {
    const webhooks = new JobQueue(store, { now: () => now, lane: { under: 'github.' } });
    await queue.enqueue({ kind: 'store.prune', payload: null });
    expect(await webhooks.hasDue()).to.equal(false);
    await queue.enqueue({ kind: 'github.push', payload: null, runAt: now + 10 });
    expect(await webhooks.hasDue()).to.equal(false);
    now += 10;
    expect(await webhooks.hasDue()).to.equal(true);
    await webhooks.claim(1);
    expect(await webhooks.hasDue()).to.equal(false);
  });

  it('requeues jobs a killed daemon left running', async () => {
    await queue.enqueue({ kind: 'k', payload: null });
    await queue.claim();
    expect(await queue.requeueInterrupted({ all: true })).to.equal(1);
    expect((await queue.claim())[0]?.attempts).to.equal(2);
  });

  it('leases a claim to one daemon: renewed while it runs, taken back when it lapses, and a late outcome is not recorded', async () => {
    const other = new JobQueue(store, { owner: 'other', now: () => now });
    const id = await queue.enqueue({ kind: 'k', payload: null });
    const [job] = await queue.claim();
    expect(await other.claim()).to.deep.equal([]);
    now += queue.leaseMs - 1;
    expect(await other.requeueInterrupted()).to.equal(0);
    expect(await queue.renewLeases()).to.equal(1);
    now += queue.leaseMs - 1;
    expect(await other.requeueInterrupted()).to.equal(0);
    now += 2;
    // The daemon stalled past its lease: another takes the job back and runs it.
    expect(await other.requeueInterrupted()).to.equal(1);
    const [again] = await other.claim();
    expect(again).to.include({ id, attempts: 2 });
    expect(await queue.succeed(job!.id, 'late')).to.equal(false);
    expect(await queue.succeedMany([[job!.id, 'late']])).to.deep.equal([job!.id]);
    expect(await queue.get(id)).to.include({ status: 'running' });
    expect(await other.succeedMany([[id, 'done']])).to.deep.equal([]);
    expect(await queue.get(id)).to.include({ status: 'succeeded', result: 'done' });
  });

  if (engine === 'postgres') it('takes back at once the jobs of a daemon with no session left on the server, and only those', async () => {
    // 'gone' claims a job and dies; 'local' (this store's sessions) claims another and lives.
    const gone = new JobQueue(store, { owner: 'a2c5d6e0-0000-4000-8000-000000000000', now: () => now });
    const other = new JobQueue(store, { owner: 'other', now: () => now });
    const left = await queue.enqueue({ kind: 'k', payload: 1 });
    await gone.claim();
    const kept = await queue.enqueue({ kind: 'k', payload: 2 });
    await queue.claim();
    expect(await other.requeueInterrupted()).to.equal(1);
    expect(await queue.get(left)).to.include({ status: 'queued' });
    expect(await queue.get(kept)).to.include({ status: 'running' });
    const [again] = await other.claim();
    expect(again).to.include({ id: left, attempts: 2 });
  });

  it('prunes finished jobs past the retention', async () => {
    const old = await queue.enqueue({ kind: 'k', payload: null });
    await queue.succeed((await queue.claim())[0]!.id, 1);
    now += 31 * 86_400_000;
    const fresh = await queue.enqueue({ kind: 'k', payload: null });
    expect(await queue.prune(30)).to.equal(1);
    expect(await queue.get(old)).to.equal(undefined);
    expect((await queue.get(fresh))?.status).to.equal('queued');
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
      handler: () => ({ run: () => 'done', transactional: true }),
      yieldTo: () => ({ waiting, claim }),
    });
    // The groups the worker takes, by their sizes (each group is one claim and one commit).
    const groups: number[] = [];
    const take = queue.claim.bind(queue);
    queue.claim = async (limit, db) => {
      const taken = await take(limit, db);
      if (taken.length > 0) groups.push(taken.length);
      return taken;
    };
    const ids: string[] = [];
    for (let n = 0; n < 7; n++) ids.push(await queue.enqueue({ kind: 'k', payload: { n } }));
    await worker.start();
    await new Promise((resolve) => setTimeout(resolve, 50));
    // The other work waits: not a job was taken, though all were due.
    expect(await Promise.all(ids.map(async (id) => (await queue.get(id))!.status))).to.deep.equal(Array(7).fill('queued'));
    // It has run and still comes: the worker looks again at once, in groups of two.
    waiting = false;
    worker.resume();
    const done = async (list: string[]) => (await Promise.all(list.map((id) => queue.get(id)))).every((job) => job!.status === 'succeeded');
    await waitFor(() => done(ids), 5000, 'the jobs to run');
    expect(groups).to.deep.equal([2, 2, 2, 1]);
    // Once it has stopped coming, groups are as large as the worker's concurrency again.
    groups.length = 0;
    claim = 8;
    const more: string[] = [];
    for (let n = 0; n < 9; n++) more.push(await queue.enqueue({ kind: 'k', payload: { n } }));
    await waitFor(() => done(more), 5000, 'the next jobs to run');
    expect(groups).to.deep.equal([8, 1]);
    // A resume with nothing given way to does nothing.
    worker.resume();
    expect(await worker.drain(1000)).to.equal(0);
  });
});

describe('a first attempt on a full disk (sqlite)', () => {
  const current = freshStore('sqlite');

  it('fails the whole transaction, never writing the job on its own', async () => {
    const store = current();
    const queue = new JobQueue(store);
    await store.transaction((tx) => tx.exec('CREATE TABLE scratch (v TEXT NOT NULL)'));
    const pages = Number((await store.get<{ page_count: number }>('PRAGMA page_count'))!.page_count);
    // Room for a job, not for what the handler writes: SQLite rolls the whole transaction back by itself.
    await store.get(`PRAGMA max_page_count = ${pages + 4}`);
    const worker = new JobWorker({
      queue, store, logger: pino({ level: 'silent' }), concurrency: 1, requeueAtStart: false,
      handler: () => ({ run: (_payload, { db }) => db.run('INSERT INTO scratch (v) VALUES (?)', 'x'.repeat(200_000)), transactional: true }),
    });
    const id = queue.newId();
    let lost: boolean | undefined;
    let failure: unknown;
    await store.transaction(async (tx) => {
      const ran = (await worker.runAtOnce([{ id, kind: 'big', payload: null }], tx)).get(id);
      await queue.enqueue({ id, kind: 'big', payload: null, ran }, tx);
    }).catch((error: unknown) => {
      failure = error;
    });
    expect(String(failure)).to.match(/full/);
    expect(await queue.get(id)).to.equal(undefined);
    expect(store.health.fault?.kind).to.equal('disk_full');
    // The transaction after it works as any other.
    await store.transaction(async (tx) => {
      lost = tx.lost;
      await tx.run('DELETE FROM scratch');
    });
    expect(lost).to.equal(false);
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
    queue.nextRunAt = async () => {
      if (failures-- > 0) throw new Error('terminating connection due to administrator command');
      return nextRunAt();
    };
    const warnings: string[] = [];
    const logger = pino({ level: 'warn' }, { write: (line: string) => void warnings.push(JSON.parse(line).msg) });
    const worker = new JobWorker({ queue, store, logger, concurrency: 1, requeueAtStart: false, handler: () => ({ run: () => 'done', transactional: true }) });
    const id = await queue.enqueue({ kind: 'k', payload: null });
    await worker.start();
    await waitFor(async () => (await queue.get(id))?.status === 'succeeded', 5000, 'the first job');
    expect(await queue.get(id)).to.include({ status: 'succeeded', attempts: 1 });
    await waitFor(() => warnings.length > 0 || undefined, 5000, 'the warning');
    expect(warnings).to.deep.equal(['jobs cannot be written; retrying']);
    const later = await queue.enqueue({ kind: 'k', payload: null });
    await waitFor(async () => (await queue.get(later))?.status === 'succeeded', 5000, 'the worker to look again');
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
    const worker = new JobWorker({ queue, store, logger, concurrency: 1, requeueAtStart: false, handler: () => ({ run: () => 'done', transactional: true }) });
    // Another thread of the daemon in the middle of its commits: it holds the database's one write lock.
    const other = new DatabaseSync(await fileOf(store));
    other.exec('BEGIN IMMEDIATE');
    try {
      // A look that found nothing due took no lock: it neither waited out the busy timeout nor failed.
      await worker.start();
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(warnings).to.deep.equal([]);
    } finally {
      other.exec('COMMIT');
      other.close();
    }
    const id = await queue.enqueue({ kind: 'k', payload: null });
    await waitFor(async () => (await queue.get(id))?.status === 'succeeded', 5000, 'the worker to run the job');
    expect(await worker.drain(1000)).to.equal(0);
  });

  it('waits for the write lock without holding up the daemon\'s thread, and writes once it is free', async () => {
    const store = current();
    const other = new DatabaseSync(await fileOf(store));
    other.exec('BEGIN IMMEDIATE');
    let ticks = 0;
    const ticker = setInterval(() => ticks++, 5);
    const written = store.transaction((tx) => tx.run("INSERT INTO audit_events (at, kind) VALUES (1, 'waited')"));
    try {
      // While the write waits, the event loop keeps turning: timers fire.
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(ticks, 'timers fired while the write waited').to.be.at.least(3);
    } finally {
      other.exec('COMMIT');
      other.close();
      clearInterval(ticker);
    }
    await written;
    expect(await store.get("SELECT kind FROM audit_events WHERE kind = 'waited'")).to.deep.include({ kind: 'waited' });
  });
});
