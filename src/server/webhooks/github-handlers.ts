import type { RegistrationApi } from '../kernel/module.ts';
import type { Store } from '../store/database.ts';
import type { Migration } from '../store/migrations.ts';

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

/** Built-in handlers: installations and their repositories kept current, pushes recorded, everything else acknowledged. */
export function registerGithubHandlers(jobs: RegistrationApi['jobs']): void {
  jobs.handle('github.push', (payload, { store }) => {
      const { body, deliveryId, hookId } = payload as DeliveryPayload;
      const commits = Array.isArray(body.commits) ? body.commits.length : 0;
      const head = body.head_commit?.id ?? body.after ?? null;
      store.prepare(`INSERT INTO pushes (hook_id, delivery_id, repository, ref, head_commit, commit_count, received_at) VALUES (?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (hook_id, delivery_id) DO NOTHING`).run(hookId ?? '', deliveryId, body.repository.full_name, body.ref, head, commits, now());
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
