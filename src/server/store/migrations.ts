/**
 * Schema migrations, applied in order at daemon start. Each runs once, inside a
 * transaction, and is recorded in schema_migrations. SQL stays portable to
 * Postgres: no SQLite-only types or functions in table definitions.
 */
export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'meta and audit events',
    sql: `
      CREATE TABLE meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
      );
      CREATE TABLE audit_events (
        id INTEGER PRIMARY KEY,
        at BIGINT NOT NULL,
        kind TEXT NOT NULL,
        actor TEXT,
        subject TEXT,
        address TEXT,
        detail TEXT
      );
      CREATE INDEX audit_events_at ON audit_events (at);
    `,
  },
  {
    version: 2,
    name: 'devices, pairing requests and invites',
    sql: `
      CREATE TABLE devices (
        id TEXT PRIMARY KEY,
        public_key TEXT NOT NULL,
        role TEXT NOT NULL,
        scopes TEXT NOT NULL,
        client_id TEXT,
        platform TEXT,
        token_hash TEXT,
        token_delivered BOOLEAN NOT NULL DEFAULT FALSE,
        paired_at BIGINT NOT NULL,
        paired_by TEXT NOT NULL,
        last_seen_at BIGINT,
        last_address TEXT,
        rotated_at BIGINT,
        revoked_at BIGINT
      );
      CREATE TABLE pairing_requests (
        id TEXT PRIMARY KEY,
        device_id TEXT NOT NULL,
        public_key TEXT NOT NULL,
        role TEXT NOT NULL,
        scopes TEXT NOT NULL,
        client_id TEXT,
        platform TEXT,
        address TEXT,
        via_proxy BOOLEAN NOT NULL,
        created_at BIGINT NOT NULL,
        expires_at BIGINT NOT NULL,
        status TEXT NOT NULL,
        resolved_at BIGINT
      );
      CREATE INDEX pairing_requests_device ON pairing_requests (device_id, status);
      CREATE TABLE device_invites (
        code_hash TEXT PRIMARY KEY,
        role TEXT NOT NULL,
        scopes TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        expires_at BIGINT NOT NULL,
        used_at BIGINT,
        used_by TEXT
      );
    `,
  },
  {
    version: 3,
    name: 'product access tokens',
    sql: `
      CREATE TABLE access_tokens (
        id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        name TEXT NOT NULL,
        scopes TEXT NOT NULL,
        token_hash TEXT NOT NULL UNIQUE,
        last_four TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        expires_at BIGINT NOT NULL,
        last_used_at BIGINT,
        revoked_at BIGINT
      );
      CREATE INDEX access_tokens_owner ON access_tokens (owner, created_at);
    `,
  },
  {
    version: 4,
    name: 'jobs, webhook deliveries, installations and pushes',
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
      CREATE TABLE webhook_deliveries (
        hook_id TEXT NOT NULL,
        delivery_id TEXT NOT NULL,
        event TEXT NOT NULL,
        received_at BIGINT NOT NULL,
        job_id TEXT NOT NULL,
        PRIMARY KEY (hook_id, delivery_id)
      );
      CREATE INDEX webhook_deliveries_received ON webhook_deliveries (received_at);
      CREATE TABLE installations (
        id BIGINT PRIMARY KEY,
        account TEXT,
        target_type TEXT,
        suspended_at BIGINT,
        deleted_at BIGINT,
        updated_at BIGINT NOT NULL
      );
      CREATE TABLE installation_repositories (
        installation_id BIGINT NOT NULL,
        full_name TEXT NOT NULL,
        added_at BIGINT NOT NULL,
        PRIMARY KEY (installation_id, full_name)
      );
      CREATE TABLE pushes (
        delivery_id TEXT PRIMARY KEY,
        repository TEXT NOT NULL,
        ref TEXT NOT NULL,
        head_commit TEXT,
        commit_count INTEGER NOT NULL,
        received_at BIGINT NOT NULL
      );
    `,
  },
  {
    version: 5,
    name: 'channel pairing, allow-lists and sessions',
    sql: `
      CREATE TABLE channel_pairing_requests (
        channel TEXT NOT NULL,
        code TEXT NOT NULL,
        account TEXT NOT NULL,
        sender TEXT NOT NULL,
        sender_name TEXT,
        status TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        expires_at BIGINT NOT NULL,
        resolved_at BIGINT,
        resolved_by TEXT,
        PRIMARY KEY (channel, code)
      );
      CREATE INDEX channel_pairing_sender ON channel_pairing_requests (channel, account, sender, expires_at);
      CREATE INDEX channel_pairing_open ON channel_pairing_requests (channel, account, status, expires_at);
      CREATE TABLE channel_allowlist (
        channel TEXT NOT NULL,
        sender TEXT NOT NULL,
        account TEXT,
        sender_name TEXT,
        added_at BIGINT NOT NULL,
        added_by TEXT NOT NULL,
        code TEXT,
        PRIMARY KEY (channel, sender)
      );
      CREATE TABLE sessions (
        key TEXT PRIMARY KEY,
        channel TEXT NOT NULL,
        account TEXT NOT NULL,
        kind TEXT NOT NULL,
        peer TEXT NOT NULL,
        peer_name TEXT,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        message_count INTEGER NOT NULL DEFAULT 0
      );
      CREATE INDEX sessions_updated ON sessions (updated_at);
      CREATE TABLE session_messages (
        id INTEGER PRIMARY KEY,
        session_key TEXT NOT NULL,
        direction TEXT NOT NULL,
        sender TEXT NOT NULL,
        sender_name TEXT,
        text TEXT NOT NULL,
        at BIGINT NOT NULL,
        via TEXT
      );
      CREATE INDEX session_messages_session ON session_messages (session_key, id);
    `,
  },
  {
    version: 6,
    name: 'tool and hook idempotency keys, session wake-ups',
    sql: `
      CREATE TABLE tool_invocations (
        caller TEXT NOT NULL,
        key TEXT NOT NULL,
        tool TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        result TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        PRIMARY KEY (caller, key)
      );
      CREATE INDEX tool_invocations_created ON tool_invocations (created_at);
      CREATE TABLE hook_requests (
        hook TEXT NOT NULL,
        key TEXT NOT NULL,
        status INTEGER NOT NULL,
        body TEXT,
        created_at BIGINT NOT NULL,
        PRIMARY KEY (hook, key)
      );
      CREATE INDEX hook_requests_created ON hook_requests (created_at);
      ALTER TABLE sessions ADD COLUMN wake_requested_at BIGINT;
    `,
  },
  {
    version: 7,
    name: 'due jobs in a partial index',
    sql: `
      -- Only queued jobs are looked up by due time, so only they are indexed: a job leaving the
      -- queue leaves the index once, and running -> succeeded changes no index at all.
      DROP INDEX jobs_claim;
      CREATE INDEX jobs_due ON jobs (run_at, created_at) WHERE status = 'queued';
    `,
  },
  {
    version: 8,
    name: 'job leases',
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
];
