import type { RegistrationApi } from '../kernel/module.ts';
import type { Store } from '../store/database.ts';
import { laneIndex } from '../store/dialect.ts';
import type { Migration } from '../store/migrations.ts';
import { WEBHOOK_LANE } from './thread-protocol.ts';

/** What a delivery's job carries. */
export interface DeliveryPayload {
  event: string;
  deliveryId: string;
  hookId: string | null;
  body: Record<string, any>;
}

const now = () => Date.now();

/** Tables of the built-in handlers beyond the core schema. */
export const WEBHOOK_MIGRATIONS: readonly Migration[] = [{
  version: 1,
  name: 'pushes keyed by hook and delivery',
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
}, {
  version: 2,
  name: 'due jobs by lane',
  // The webhook thread takes deliveries' jobs, the daemon's worker every other kind: each finds its own due jobs in an
  // index of their own, however many of the other kind are queued.
  sql: `${laneIndex('jobs_due_webhooks', { under: WEBHOOK_LANE })}; ${laneIndex('jobs_due_others', { outside: WEBHOOK_LANE })};`,
}, {
  version: 3,
  name: 'pushes keyed by job',
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
}];

function recordInstallation(store: Store, installation: Record<string, any>, state: { suspended?: boolean; deleted?: boolean } = {}): void {
  const account = installation.account?.login ?? null;
  const targetType = installation.target_type ?? null;
  store.prepare(`INSERT INTO installations (id, account, target_type, suspended_at, deleted_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)
    ON CONFLICT (id) DO UPDATE SET account = COALESCE(excluded.account, installations.account), target_type = COALESCE(excluded.target_type, installations.target_type),
    suspended_at = excluded.suspended_at, deleted_at = excluded.deleted_at, updated_at = excluded.updated_at`).run(
    installation.id, account, targetType, state.suspended ? now() : null, state.deleted ? now() : null, now(),
  );
}

const repositoryNames = (list: unknown): string[] =>
  Array.isArray(list) ? list.map((repository) => repository?.full_name).filter((name): name is string => typeof name === 'string') : [];

/**
 * Whether a delivery's job owes no order to the jobs queued before it: a push
 * is recorded on its own (keyed by its job) and an event the gateway only
 * acknowledges writes nothing, so any order serves them. Installation events
 * change what the next one builds on, and run in the order they came.
 */
export const runsInAnyOrder = (kind: string): boolean => kind !== 'github.installation' && kind !== 'github.installation_repositories';

/** Built-in handlers: installations and their repositories kept current, pushes recorded, everything else acknowledged. */
export function registerGithubHandlers(jobs: RegistrationApi['jobs']): void {
  jobs.handle('github.push', (payload, { store, jobId }) => {
      const { body, deliveryId, hookId } = payload as DeliveryPayload;
      const commits = Array.isArray(body.commits) ? body.commits.length : 0;
      const head = body.head_commit?.id ?? body.after ?? null;
      // A job run again (its lease lapsed while it ran) records its push once.
      store.prepare(`INSERT INTO pushes (job_id, hook_id, delivery_id, repository, ref, head_commit, commit_count, received_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (job_id) DO NOTHING`).run(jobId, hookId ?? '', deliveryId, body.repository.full_name, body.ref, head, commits, now());
      return { repository: body.repository.full_name, ref: body.ref, headCommit: head, commits };
    });
  jobs.handle('github.installation', (payload, { store }) => {
      const { body } = payload as DeliveryPayload;
      const action = String(body.action);
      store.transaction(() => {
        recordInstallation(store, body.installation, { suspended: action === 'suspend', deleted: action === 'deleted' });
        if (action === 'created') {
          for (const name of repositoryNames(body.repositories)) {
            store.prepare('INSERT INTO installation_repositories (installation_id, full_name, added_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING').run(body.installation.id, name, now());
          }
        }
        if (action === 'deleted') store.prepare('DELETE FROM installation_repositories WHERE installation_id = ?').run(body.installation.id);
      });
      return { installation: body.installation.id, action };
    });
  jobs.handle('github.installation_repositories', (payload, { store }) => {
      const { body } = payload as DeliveryPayload;
      const added = repositoryNames(body.repositories_added);
      const removed = repositoryNames(body.repositories_removed);
      store.transaction(() => {
        recordInstallation(store, body.installation);
        for (const name of added) {
          store.prepare('INSERT INTO installation_repositories (installation_id, full_name, added_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING').run(body.installation.id, name, now());
        }
        for (const name of removed) {
          store.prepare('DELETE FROM installation_repositories WHERE installation_id = ? AND full_name = ?').run(body.installation.id, name);
        }
      });
      return { installation: body.installation.id, added, removed };
    });
  jobs.handle('github.*', (payload) => {
      const { event, body } = payload as DeliveryPayload;
      return { event, action: typeof body.action === 'string' ? body.action : null, acknowledged: true };
    });
}
