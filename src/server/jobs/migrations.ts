/** The tables the jobs module owns: jobs, their payloads and the periodic jobs' schedule. */
import type { Migration } from '../store/migrations.ts';
import { laneIndex, WEBHOOK_LANE } from './job-sql.ts';

export const JOB_MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'jobs and their payloads',
    was: { schema: 4 },
    sql: `
      CREATE TABLE jobs (
        id TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        status TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        max_attempts INTEGER NOT NULL,
        run_at BIGINT NOT NULL,
        created_at BIGINT NOT NULL,
        started_at BIGINT,
        finished_at BIGINT,
        error TEXT,
        result TEXT,
        source TEXT
      );
      CREATE INDEX jobs_claim ON jobs (status, run_at);
      -- Payloads live apart, so status changes rewrite a small row, not kilobytes of payload.
      CREATE TABLE job_payloads (
        job_id TEXT PRIMARY KEY,
        payload TEXT NOT NULL
      );
      CREATE INDEX jobs_created ON jobs (created_at, id);
    `,
  },
  {
    version: 2,
    name: 'due jobs in a partial index',
    was: { schema: 7 },
    sql: `
      -- Only queued jobs are looked up by due time, so only they are indexed: a job leaving the
      -- queue leaves the index once, and running -> succeeded changes no index at all.
      DROP INDEX jobs_claim;
      CREATE INDEX jobs_due ON jobs (run_at, created_at) WHERE status = 'queued';
    `,
  },
  {
    version: 3,
    name: 'job leases',
    was: { schema: 8 },
    sql: `
      -- Which daemon runs a job and until when its claim holds: a daemon that dies leaves its jobs to be requeued
      -- when the lease runs out, by whichever daemon sees it first.
      ALTER TABLE jobs ADD COLUMN claimed_by TEXT;
      ALTER TABLE jobs ADD COLUMN lease_expires_at BIGINT;
      CREATE INDEX jobs_leases ON jobs (lease_expires_at) WHERE status = 'running';
      -- Jobs queued in one millisecond are taken in the order of their ids (which sort by creation), on every engine.
      DROP INDEX jobs_due;
      CREATE INDEX jobs_due ON jobs (run_at, created_at, id) WHERE status = 'queued';
    `,
  },
  {
    version: 4,
    name: 'due jobs by lane',
    was: { module: 'webhooks', version: 2 },
    // On SQLite the webhook thread takes deliveries' jobs, the daemon's worker every other kind: each finds its own
    // due jobs in an index of their own, however many of the other kind are queued.
    sql: `${laneIndex('jobs_due_webhooks', { under: WEBHOOK_LANE })}; ${laneIndex('jobs_due_others', { outside: WEBHOOK_LANE })};`,
  },
  {
    version: 5,
    name: 'periodic jobs',
    was: { module: 'jobs', version: 1 },
    sql: 'CREATE TABLE job_schedules (name TEXT PRIMARY KEY, last_queued_at BIGINT NOT NULL)',
  },
];
