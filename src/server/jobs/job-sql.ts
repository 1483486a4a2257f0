/**
 * The jobs' SQL that differs by engine or is built for a lane: claims, due
 * jobs, and the group statements for an engine whose parameters may be arrays
 * (Dialect.arrays: PostgreSQL's; those statements number their own
 * parameters).
 */
import type { Dialect } from '../store/database.ts';

/**
 * Which job kinds a worker takes: every kind, the kinds under a prefix
 * (`github.`), or every kind outside it. A lane is written as a range of
 * kinds, literally, so that it matches the partial index made for it
 * (laneIndex): SQLite uses a partial index only for a query that repeats its
 * condition.
 */
export type JobLane = { under: string } | { outside: string } | undefined;

/** The job kinds of webhook deliveries (github.<event>): on SQLite a thread of their own runs them while it runs. */
export const WEBHOOK_LANE = 'github.';

const KIND_PREFIX = /^[a-z0-9_:-]+\.$/;

/** The SQL condition on `kind` of a lane ('' for every kind). */
export function laneCondition(lane: JobLane): string {
  if (!lane) return '';
  const prefix = 'under' in lane ? lane.under : lane.outside;
  if (!KIND_PREFIX.test(prefix)) throw new Error(`a job lane's prefix is lower-case letters, digits, _ : - and ends in a dot: ${prefix}`);
  // The first string after every kind that starts with the prefix: its last character (the dot) plus one.
  const after = `${prefix.slice(0, -1)}/`;
  return 'under' in lane ? `kind >= '${prefix}' AND kind < '${after}'` : `(kind < '${prefix}' OR kind >= '${after}')`;
}

/** A lane's condition as more of a WHERE clause ('' for every kind). */
const andLane = (lane: JobLane): string => {
  const condition = laneCondition(lane);
  return condition ? ` AND ${condition}` : '';
};

/** The partial index of a lane's due jobs. */
export function laneIndex(name: string, lane: Exclude<JobLane, undefined>): string {
  return `CREATE INDEX ${name} ON jobs (run_at, created_at, id) WHERE status = 'queued' AND ${laneCondition(lane)}`;
}

/**
 * The statement that takes due jobs (of a lane): where daemons share the
 * database the rows are skipped while another daemon is taking them
 * (Dialect.skipLocked), so no two daemons claim one job and none waits on
 * another; where a statement is a round trip the payloads come in the same
 * statement, one round trip for the whole claim. RETURNING gives rows in no set
 * order: the caller sorts them by the columns it returns.
 */
export function claimDueJobs(dialect: Dialect, lane?: JobLane): string {
  const due = dialect.skipLocked(`SELECT id FROM jobs WHERE status = 'queued' AND run_at <= ?${andLane(lane)} ORDER BY run_at, created_at, id LIMIT ?`);
  const claim = `UPDATE jobs SET status = 'running', started_at = ?, attempts = attempts + 1, claimed_by = ?, lease_expires_at = ?
    WHERE id IN (${due})
    RETURNING id, kind, attempts, max_attempts, run_at, created_at`;
  return dialect.oneWriter ? claim : `WITH claimed AS (${claim}) SELECT c.*, p.payload FROM claimed c LEFT JOIN job_payloads p ON p.job_id = c.id`;
}

/** A queued job of a lane that is due now, if any (the lane's partial index answers it). */
export const anyDueJob = (lane?: JobLane): string => `SELECT 1 AS due FROM jobs WHERE status = 'queued' AND run_at <= ?${andLane(lane)} LIMIT 1`;

/** When the next queued job of a lane is due. */
export const nextDueJob = (lane?: JobLane): string => `SELECT MIN(run_at) AS next FROM jobs WHERE status = 'queued'${andLane(lane)}`;

/**
 * New jobs and their payloads in one statement, whatever their number (a
 * group of deliveries' jobs), each in the state its first attempt (if it made
 * one as it was queued) left it: see JobQueue.enqueue. A job done on its first
 * attempt keeps no payload.
 */
export const PG_INSERT_JOBS = `WITH input AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $4::bigint[], $5::text[], $6::text[], $7::text[], $8::int[], $9::bigint[], $10::bigint[], $11::text[], $12::text[])
      AS t(id, kind, max_attempts, run_at, source, payload, status, attempts, started_at, finished_at, result, error)),
  jobs AS (INSERT INTO jobs (id, kind, status, attempts, max_attempts, run_at, created_at, source, started_at, finished_at, result, error)
    SELECT id, kind, status, attempts, max_attempts, run_at, $13::bigint, source, started_at, finished_at, result, error FROM input RETURNING id)
  INSERT INTO job_payloads (job_id, payload) SELECT id, payload FROM input WHERE payload IS NOT NULL`;

/** Outcomes of a group of jobs this daemon still holds, in one statement; returns the ids recorded. */
export const PG_SUCCEED_JOBS = `UPDATE jobs SET status = 'succeeded', finished_at = $1, result = t.result, error = NULL, lease_expires_at = NULL
  FROM unnest($2::text[], $3::text[]) AS t(id, result) WHERE jobs.id = t.id AND jobs.status = 'running' AND jobs.claimed_by = $4 RETURNING jobs.id`;
