import { randomFillSync } from 'node:crypto';
import type { Job, JobStatus } from '../../shared/protocol/results.ts';
import { DomainError } from '../kernel/errors.ts';
import type { Db, Store, Tx } from '../store/database.ts';
import { inTransaction } from '../store/engine.ts';
import { inBatches } from '../store/retention.ts';
import { anyDueJob, claimDueJobs, type JobLane, nextDueJob, PG_INSERT_JOBS, PG_SUCCEED_JOBS } from './job-sql.ts';

export interface ClaimedJob {
  id: string;
  kind: string;
  payload: unknown;
  attempts: number;
  maxAttempts: number;
}

/** The outcome of a job's first attempt, made as it was queued (see JobWorker.runAtOnce). */
export type FirstAttempt = { status: 'succeeded'; result: unknown } | { status: 'failed'; error: string };

export const JOB_LIMITS = {
  defaultMaxAttempts: 5,
  /** First retry after this long, doubling each attempt, capped below. */
  backoffBaseMs: 1000,
  backoffMaxMs: 5 * 60_000,
  maxListLimit: 200,
  defaultListLimit: 50,
} as const;

/** A row of jobs as both engines read it (their integers, BIGINT included, come as numbers). */
interface JobRow {
  id: string;
  kind: string;
  status: JobStatus;
  attempts: number;
  max_attempts: number;
  run_at: number;
  created_at: number;
  started_at: number | null;
  finished_at: number | null;
  result: string | null;
  error: string | null;
  source: string | null;
}

/** What a claim returns of each job it took; its payload too where the claim reads it in the same statement (claimDueJobs). */
type ClaimRow = Pick<JobRow, 'id' | 'kind' | 'attempts' | 'max_attempts' | 'run_at' | 'created_at'> & { payload?: string | null };

/** How long a job waits after its n-th failed attempt: doubling from the base, capped. */
const retryDelay = (attempts: number) => Math.min(JOB_LIMITS.backoffBaseMs * 2 ** (attempts - 1), JOB_LIMITS.backoffMaxMs);
const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

function view(row: JobRow): Job {
  return {
    id: row.id, kind: row.kind, status: row.status, attempts: row.attempts, maxAttempts: row.max_attempts,
    runAt: iso(row.run_at)!, createdAt: iso(row.created_at)!, startedAt: iso(row.started_at), finishedAt: iso(row.finished_at),
    error: row.error, result: row.result === null ? null : JSON.parse(row.result), source: row.source,
  };
}


let lastIdTime = 0;
let sequence = 0;
/**
 * Job ids sort by creation: a time part, a sequence within the millisecond and
 * randomness. New rows then land at the end of every index instead of on a
 * random page, which keeps each commit small.
 */
/** Entropy drawn 4 KiB at a time: one call to the generator per 680 ids instead of one per id. */
const entropy = Buffer.alloc(4096);
let entropyUsed = entropy.length;
function randomSuffix(): string {
  if (entropyUsed + 6 > entropy.length) {
    randomFillSync(entropy);
    entropyUsed = 0;
  }
  const suffix = entropy.toString('base64url', entropyUsed, entropyUsed + 6);
  entropyUsed += 6;
  return suffix;
}

function newJobId(now: number): string {
  sequence = now === lastIdTime ? sequence + 1 : 0;
  lastIdTime = now;
  return `job_${now.toString(36).padStart(9, '0')}${sequence.toString(36).padStart(3, '0')}${randomSuffix()}`;
}

const encodeCursor = (createdAt: number, id: string) => Buffer.from(`${createdAt}:${id}`).toString('base64url');
function decodeCursor(cursor: string): [number, string] {
  const text = Buffer.from(cursor, 'base64url').toString('utf8');
  const match = /^(\d{1,16}):(job_[A-Za-z0-9_-]{1,64})$/.exec(text);
  if (!match) throw new DomainError('invalid', 'Cursor is not one this API returned.');
  return [Number(match[1]), match[2]!];
}

/**
 * How many parsed payloads wait for the worker, at most: about what it claims
 * in the next moments. Beyond that (a worker lagging behind a burst) a job's
 * payload is read from the store when it is claimed, so the memory the queue
 * holds does not grow with its backlog.
 */
const PARSED_CACHE = { entries: 512, bytes: 4 * 1024 * 1024 };

/** A job to queue (see JobQueue.enqueue). */
export interface NewJob {
  id?: string;
  kind: string;
  payload?: unknown;
  source?: string;
  maxAttempts?: number;
  runAt?: number;
  /** The payload already as JSON, when the caller has it. */
  serialized?: string;
  /** The same payload as an object: the worker then uses it instead of parsing the stored JSON; it must not be changed afterwards. */
  parsed?: unknown;
  /** The outcome of a first attempt made in the same transaction (see JobWorker.runAtOnce). */
  ran?: FirstAttempt;
}

const INSERT_JOB = `INSERT INTO jobs (id, kind, max_attempts, created_at, source, status, attempts, run_at, started_at, finished_at, result, error)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`;
const INSERT_PAYLOAD = 'INSERT INTO job_payloads (job_id, payload) VALUES (?, ?)';
const SUCCEED = "UPDATE jobs SET status = 'succeeded', finished_at = ?, result = ?, error = NULL, lease_expires_at = NULL WHERE id = ? AND status = 'running' AND claimed_by = ?";
const RETRY_LATER = "UPDATE jobs SET status = 'queued', run_at = ?, error = ?, claimed_by = NULL, lease_expires_at = NULL WHERE id = ? AND status = 'running' AND claimed_by = ?";
const FAIL = "UPDATE jobs SET status = 'failed', finished_at = ?, error = ?, lease_expires_at = NULL WHERE id = ? AND status = 'running' AND claimed_by = ?";
const PAYLOAD = 'SELECT payload FROM job_payloads WHERE job_id = ?';
/** A batch of finished jobs past the retention (a time, a batch's size). */
const PRUNABLE = "SELECT id FROM jobs WHERE status IN ('succeeded', 'failed') AND finished_at < ? ORDER BY id LIMIT ?";

/** Durable jobs in the profile's database: queued -> running -> succeeded | failed, with retries and backoff. */
export class JobQueue {
  private readonly store: Store;
  private readonly now: () => number;
  private listeners = new Set<() => void>();
  /**
   * Payloads of jobs just queued, already parsed, for the worker that claims
   * them moments later: it need not read and parse them again. Bounded (see
   * PARSED_CACHE); a job missing here is read from the database as usual.
   */
  private readonly parsed = new Map<string, { value: unknown; bytes: number }>();
  private parsedBytes = 0;

  /** The daemon this queue claims jobs for (its instance id). */
  readonly owner: string;
  /** How long a claim holds without news from the daemon that runs the job; its worker renews it every third of that. */
  readonly leaseMs: number;
  /** The kinds this queue's worker takes (undefined: every kind); see useLane. */
  private lane: JobLane;
  private claimSql!: string;
  private nextSql!: string;
  private dueSql!: string;

  constructor(store: Store, options: { owner?: string; leaseMs?: number; now?: () => number; lane?: JobLane } = {}) {
    this.store = store;
    this.owner = options.owner ?? 'local';
    this.leaseMs = options.leaseMs ?? 30_000;
    this.now = options.now ?? Date.now;
    this.useLane(options.lane);
  }

  /**
   * Which kinds claim() and nextRunAt() look at: every kind, or a lane of
   * them while another worker (a thread of the daemon) runs the rest. Every
   * other operation (list, retry, prune) sees every job.
   */
  useLane(lane: JobLane): void {
    this.lane = lane;
    this.claimSql = claimDueJobs(this.store.dialect, lane);
    this.nextSql = nextDueJob(lane);
    this.dueSql = anyDueJob(lane);
  }

  /** Whether this queue's worker runs jobs of a kind (see useLane). */
  takes(kind: string): boolean {
    const lane = this.lane;
    if (!lane) return true;
    return 'under' in lane ? kind.startsWith(lane.under) : !kind.startsWith(lane.outside);
  }

  private changeListeners = new Set<() => void>();

  /** Called when work may be waiting, so the worker need not poll. */
  onEnqueued(listener: () => void): void {
    this.listeners.add(listener);
  }

  /** Called when a job is queued or changes status (for live views; may be called often). */
  onChanged(listener: () => void): void {
    this.listeners.add(listener);
    this.changeListeners.add(listener);
  }

  /** Tells the live views that jobs changed: called here, and for the jobs another worker of the daemon runs. */
  changed(): void {
    for (const listener of this.changeListeners) listener();
  }

  /** Tells the worker (and the live views) that jobs may be waiting. */
  private enqueued(): void {
    queueMicrotask(() => this.listeners.forEach((listener) => listener()));
  }

  /**
   * Adds a job; give the caller's transaction as `db` to commit it with what
   * caused it. A job with `ran` (a first attempt made in the same
   * transaction) is recorded finished, retrying or running, not queued, and
   * one that succeeded keeps no payload.
   */
  async enqueue(job: NewJob, db: Db = this.store): Promise<string> {
    const id = job.id ?? newJobId(this.now());
    const now = this.now();
    const state = this.stateOf(job, now);
    await db.run(INSERT_JOB, id, job.kind, state.maxAttempts, now, job.source ?? null, state.status, state.attempts, state.runAt, state.startedAt,
      state.finishedAt, state.result, state.error);
    // Done on its first attempt, a job keeps no payload: nothing reads it again (only failed jobs are retried).
    if (job.ran?.status !== 'succeeded') await db.run(INSERT_PAYLOAD, id, job.serialized ?? JSON.stringify(job.payload ?? null));
    this.queued([{ ...job, id }], db);
    return id;
  }

  /**
   * The state a new job is recorded in: queued, or what its first attempt
   * (made as it was queued) left it in: succeeded, or failed (to be retried
   * after the backoff, unless it was the only attempt allowed).
   */
  private stateOf(job: NewJob, now: number) {
    const maxAttempts = job.maxAttempts ?? JOB_LIMITS.defaultMaxAttempts;
    const ran = job.ran;
    const state = (status: JobStatus, attempts: number, runAt: number, finished: boolean, result: string | null = null, error: string | null = null) => ({
      status, attempts, maxAttempts, runAt, startedAt: attempts > 0 ? now : null, finishedAt: finished ? now : null, result, error,
    });
    if (!ran) return state('queued', 0, job.runAt ?? now, false);
    if (ran.status === 'succeeded') return state('succeeded', 1, now, true, JSON.stringify(ran.result ?? null));
    return maxAttempts > 1 ? state('queued', 1, now + retryDelay(1), false, null, ran.error) : state('failed', 1, now, true, null, ran.error);
  }

  /**
   * After new jobs are written (committed, when they were written in a
   * transaction): the worker hears of what it may take, the live views of
   * the rest.
   */
  private queued(jobs: NewJob[], db: Db): void {
    let waiting = false;
    for (const job of jobs) {
      if (job.ran?.status === 'succeeded') continue;
      waiting = true;
      // Kept only while the worker is near: the newest jobs of a backlog are claimed last, and would only hold memory.
      if (!job.ran) this.keepParsed(job.id!, job.parsed, job.serialized?.length ?? 0);
    }
    // Nothing for a worker to take: only the live views hear of it.
    const tell = waiting ? () => this.enqueued() : () => queueMicrotask(() => this.changed());
    if (inTransaction(db)) db.afterCommit(tell);
    else tell();
  }

  /** Whether a job of this queue's lane is due and not yet taken: a job run at once would overtake it. */
  async hasDue(db: Db = this.store): Promise<boolean> {
    return (await db.get(this.dueSql, this.now())) !== undefined;
  }

  /**
   * Adds several jobs at once (see enqueue), as the last write of the
   * caller's transaction: where parameters may be arrays (PostgreSQL) one
   * statement for the whole group, sent with the transaction's COMMIT in one
   * round trip (Tx.send).
   */
  queueMany(jobs: (NewJob & { id: string; serialized: string })[], tx: Tx): void {
    if (jobs.length === 0) return;
    const now = this.now();
    if (!tx.dialect.arrays) {
      for (const job of jobs) {
        const state = this.stateOf(job, now);
        tx.send(INSERT_JOB, job.id, job.kind, state.maxAttempts, now, job.source ?? null, state.status, state.attempts, state.runAt, state.startedAt,
          state.finishedAt, state.result, state.error);
        if (job.ran?.status !== 'succeeded') tx.send(INSERT_PAYLOAD, job.id, job.serialized);
      }
    } else {
      const states = jobs.map((job) => this.stateOf(job, now));
      const column = <K extends keyof ReturnType<JobQueue['stateOf']>>(key: K) => states.map((state) => state[key]);
      tx.send(PG_INSERT_JOBS, jobs.map((job) => job.id), jobs.map((job) => job.kind), column('maxAttempts'), column('runAt'), jobs.map((job) => job.source ?? null),
        jobs.map((job) => (job.ran?.status === 'succeeded' ? null : job.serialized)), column('status'), column('attempts'), column('startedAt'), column('finishedAt'),
        column('result'), column('error'), now);
    }
    this.queued(jobs, tx);
  }

  /** Keeps a just-queued job's parsed payload for the worker, within the cache's bounds. */
  private keepParsed(id: string, parsed: unknown, bytes: number): void {
    if (parsed !== undefined && this.parsed.size < PARSED_CACHE.entries && this.parsedBytes + bytes <= PARSED_CACHE.bytes) {
      this.parsed.set(id, { value: parsed, bytes });
      this.parsedBytes += bytes;
    }
  }

  /** A new job's id, for a caller that records it before it enqueues the job (in the same transaction). */
  newId(): string {
    return newJobId(this.now());
  }

  /** A claimed job's payload: the parsed copy kept at its first attempt, else the stored one. */
  private payloadOf(id: string, attempts: number, stored: () => string | null | undefined): unknown {
    const cached = this.parsed.get(id);
    if (cached !== undefined) {
      this.parsed.delete(id);
      this.parsedBytes -= cached.bytes;
      if (attempts === 1) return cached.value;
    }
    return JSON.parse(stored() ?? 'null');
  }

  /**
   * Takes up to `limit` due jobs, atomically, marking them running: where a
   * statement is a round trip (PostgreSQL) one statement with their payloads,
   * else a transaction (the caller's, when it gives one) that reads the
   * payloads it does not hold parsed.
   */
  async claim(limit = 1, db: Db = this.store): Promise<ClaimedJob[]> {
    const now = this.now();
    const take = async (tx: Db) => {
      const rows = (await tx.all<ClaimRow>(this.claimSql, now, this.owner, now + this.leaseMs, now, limit))
        .sort((a, b) => a.run_at - b.run_at || a.created_at - b.created_at || (a.id < b.id ? -1 : 1));
      const claimed: ClaimedJob[] = [];
      for (const { id, kind, attempts, max_attempts: maxAttempts, payload } of rows) {
        const stored = !tx.dialect.oneWriter || this.parsed.has(id) ? payload : (await tx.get<{ payload: string }>(PAYLOAD, id))?.payload;
        claimed.push({ id, kind, attempts, maxAttempts, payload: this.payloadOf(id, attempts, () => stored) });
      }
      // Every due job is taken: what is left here is for jobs not yet due, or ones whose transaction was rolled back. The store has them.
      if (rows.length < limit && this.parsed.size > 0) {
        this.parsed.clear();
        this.parsedBytes = 0;
      }
      return claimed;
    };
    return !db.dialect.oneWriter || db !== this.store ? take(db) : this.store.transaction(take);
  }

  /** When the next queued job is due, if any. */
  async nextRunAt(): Promise<number | undefined> {
    return (await this.store.get<{ next: number | null }>(this.nextSql))?.next ?? undefined;
  }

  /**
   * Records a job's outcome while this daemon still holds its claim; false
   * when the claim was lost (its lease ran out and the job went back to the
   * queue), and the outcome is then not recorded.
   */
  async succeed(id: string, result: unknown, db: Db = this.store): Promise<boolean> {
    const { changes } = await db.run(SUCCEED, this.now(), JSON.stringify(result ?? null), id, this.owner);
    this.changed();
    return changes === 1;
  }

  /**
   * Records the outcomes of several jobs that succeeded (see succeed); returns
   * the ids whose claim was lost. Where parameters may be arrays
   * (PostgreSQL) one statement for them all.
   */
  async succeedMany(outcomes: [id: string, result: unknown][], db: Db = this.store): Promise<string[]> {
    if (outcomes.length === 0) return [];
    if (!db.dialect.arrays) {
      const lost: string[] = [];
      for (const [id, result] of outcomes) if (!(await this.succeed(id, result, db))) lost.push(id);
      return lost;
    }
    const done = await db.all<{ id: string }>(PG_SUCCEED_JOBS, this.now(), outcomes.map(([id]) => id), outcomes.map(([, result]) => JSON.stringify(result ?? null)), this.owner);
    this.changed();
    const recorded = new Set(done.map((row) => row.id));
    return outcomes.filter(([id]) => !recorded.has(id)).map(([id]) => id);
  }

  /** A failed attempt goes back to the queue with backoff until its attempts run out. */
  async fail(job: ClaimedJob, error: string, db: Db = this.store): Promise<boolean> {
    const now = this.now();
    const { changes } = job.attempts < job.maxAttempts
      ? await db.run(RETRY_LATER, now + retryDelay(job.attempts), error, job.id, this.owner)
      : await db.run(FAIL, now, error, job.id, this.owner);
    this.changed();
    return changes === 1;
  }

  /**
   * Jobs left running by a daemon that is gone go back to the queue. `all`
   * (a daemon alone on its SQLite file, at start) takes every running job;
   * otherwise those whose lease ran out (their daemon stopped renewing it),
   * and on PostgreSQL at once those whose daemon has no session left on the
   * server: every connection of a daemon carries its instance id in its
   * application name (daemonApplicationName), and the server ends the
   * sessions of a daemon that died with its connections. A daemon restarted
   * after a kill -9 takes its jobs back as it starts, not a lease later.
   */
  async requeueInterrupted(options: { all?: boolean } = {}): Promise<number> {
    const now = this.now();
    const requeue = "UPDATE jobs SET status = 'queued', run_at = ?, claimed_by = NULL, lease_expires_at = NULL WHERE status = 'running'";
    const { changes } = options.all
      ? await this.store.run(requeue, now)
      : await this.store.run(`${requeue} AND (lease_expires_at IS NULL OR lease_expires_at < ? OR ${this.store.dialect.daemonGone('jobs.claimed_by')})`, now, now);
    if (changes > 0) this.changed();
    return changes;
  }

  /** Jobs by kind and state, and for the queued ones the age of the oldest (for metrics). */
  async stats(): Promise<{ kind: string; status: string; count: number; oldestAt?: number }[]> {
    const rows = await this.store.all<{ kind: string; status: string; n: number; oldest: number | null }>(
      "SELECT kind, status, COUNT(*) AS n, MIN(CASE WHEN status = 'queued' THEN created_at END) AS oldest FROM jobs GROUP BY kind, status",
    );
    return rows.map((row) => ({ kind: row.kind, status: row.status, count: row.n, ...(row.oldest === null ? {} : { oldestAt: row.oldest }) }));
  }

  /** Renews this daemon's claims on the jobs it runs. */
  async renewLeases(): Promise<number> {
    const now = this.now();
    return (await this.store.run("UPDATE jobs SET lease_expires_at = ? WHERE status = 'running' AND claimed_by = ?", now + this.leaseMs, this.owner)).changes;
  }

  /** Wakes this queue's worker: jobs may have been queued by another daemon. */
  wake(): void {
    this.listeners.forEach((listener) => listener());
  }

  async get(id: string, db: Db = this.store): Promise<Job | undefined> {
    const row = await db.get<JobRow>('SELECT * FROM jobs WHERE id = ?', id);
    return row ? view(row) : undefined;
  }

  /** Newest first, with an opaque cursor for the next page. */
  async list(filter: { status?: JobStatus; kind?: string; limit?: number; cursor?: string }): Promise<{ jobs: Job[]; nextCursor: string | null }> {
    const limit = filter.limit ?? JOB_LIMITS.defaultListLimit;
    const where: string[] = [];
    const values: (string | number)[] = [];
    if (filter.status) { where.push('status = ?'); values.push(filter.status); }
    if (filter.kind) { where.push('kind = ?'); values.push(filter.kind); }
    if (filter.cursor) {
      const [createdAt, id] = decodeCursor(filter.cursor);
      where.push('(created_at < ? OR (created_at = ? AND id < ?))');
      values.push(createdAt, createdAt, id);
    }
    const rows = await this.store.all<JobRow>(`SELECT * FROM jobs ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY created_at DESC, id DESC LIMIT ?`, ...values, limit + 1);
    const page = rows.slice(0, limit);
    const last = page.at(-1);
    return { jobs: page.map(view), nextCursor: rows.length > limit && last ? encodeCursor(last.created_at, last.id) : null };
  }

  /** Queues a failed job again with a fresh set of attempts; undefined when there is no such job. */
  async retry(id: string): Promise<Job | 'not-failed' | undefined> {
    const { changes } = await this.store.run("UPDATE jobs SET status = 'queued', attempts = 0, run_at = ?, finished_at = NULL, error = NULL WHERE id = ? AND status = 'failed'", this.now(), id);
    if (changes === 0) {
      const job = await this.get(id);
      return job ? 'not-failed' : undefined;
    }
    this.enqueued();
    return this.get(id);
  }

  /**
   * Deletes finished jobs older than the retention, with their payloads, in
   * bounded batches (see inBatches); says how many. Each batch is one
   * transaction whose two statements pick the same jobs: the first ones by id.
   */
  async prune(retentionDays: number): Promise<number> {
    const before = this.now() - retentionDays * 86_400_000;
    return inBatches((limit) => this.store.transaction(async (tx) => {
      await tx.run(`DELETE FROM job_payloads WHERE job_id IN (${PRUNABLE})`, before, limit);
      return (await tx.run(`DELETE FROM jobs WHERE id IN (${PRUNABLE})`, before, limit)).changes;
    }));
  }
}
