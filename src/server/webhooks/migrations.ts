/** The tables the webhooks module owns: deliveries as they came, and what the built-in handlers keep of them. */
import type { Migration } from '../store/migrations.ts';

export const WEBHOOK_MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'deliveries, installations and pushes',
    was: { schema: 4 },
    sql: `
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
    version: 2,
    name: 'pushes keyed by hook and delivery',
    was: { module: 'webhooks', version: 1 },
    sql: `
      -- Deliveries of two hooks may share a delivery id; each push is its own row, keyed like the deliveries themselves.
      ALTER TABLE pushes RENAME TO pushes_by_delivery;
      CREATE TABLE pushes (
        hook_id TEXT NOT NULL,
        delivery_id TEXT NOT NULL,
        repository TEXT NOT NULL,
        ref TEXT NOT NULL,
        head_commit TEXT,
        commit_count INTEGER NOT NULL,
        received_at BIGINT NOT NULL,
        PRIMARY KEY (hook_id, delivery_id)
      );
      INSERT INTO pushes (hook_id, delivery_id, repository, ref, head_commit, commit_count, received_at)
        SELECT '', delivery_id, repository, ref, head_commit, commit_count, received_at FROM pushes_by_delivery;
      DROP TABLE pushes_by_delivery;
    `,
  },
  {
    version: 3,
    name: 'pushes keyed by job',
    was: { module: 'webhooks', version: 3 },
    // A push is its delivery's job's: keyed by the job's id, which sorts by time, a new push lands at the end of its
    // index instead of on a random page of it (delivery ids are random), a page less to write per delivery. A push whose
    // delivery row retention already removed keeps a key made of its delivery.
    sql: `
      CREATE TABLE pushes_by_job (
        job_id TEXT NOT NULL PRIMARY KEY,
        hook_id TEXT NOT NULL,
        delivery_id TEXT NOT NULL,
        repository TEXT NOT NULL,
        ref TEXT NOT NULL,
        head_commit TEXT,
        commit_count INTEGER NOT NULL,
        received_at BIGINT NOT NULL
      );
      INSERT INTO pushes_by_job (job_id, hook_id, delivery_id, repository, ref, head_commit, commit_count, received_at)
        SELECT COALESCE(d.job_id, 'delivery:' || p.hook_id || ':' || p.delivery_id), p.hook_id, p.delivery_id, p.repository, p.ref, p.head_commit, p.commit_count, p.received_at
        FROM pushes p LEFT JOIN webhook_deliveries d ON d.hook_id = p.hook_id AND d.delivery_id = p.delivery_id;
      DROP TABLE pushes;
      ALTER TABLE pushes_by_job RENAME TO pushes;
    `,
  },
];
