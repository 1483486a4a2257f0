import type { RegistrationApi } from '../kernel/module.ts';
import type { Db } from '../store/database.ts';

/** What a delivery's job carries. */
export interface DeliveryPayload {
  event: string;
  deliveryId: string;
  hookId: string | null;
  body: Record<string, any>;
}

const now = () => Date.now();

async function recordInstallation(db: Db, installation: Record<string, any>, state: { suspended?: boolean; deleted?: boolean } = {}): Promise<void> {
  const account = installation.account?.login ?? null;
  const targetType = installation.target_type ?? null;
  await db.run(`INSERT INTO installations (id, account, target_type, suspended_at, deleted_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)
    ON CONFLICT (id) DO UPDATE SET account = COALESCE(excluded.account, installations.account), target_type = COALESCE(excluded.target_type, installations.target_type),
    suspended_at = excluded.suspended_at, deleted_at = excluded.deleted_at, updated_at = excluded.updated_at`,
  installation.id, account, targetType, state.suspended ? now() : null, state.deleted ? now() : null, now());
}

const ADD_REPOSITORY = 'INSERT INTO installation_repositories (installation_id, full_name, added_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING';

const repositoryNames = (list: unknown): string[] =>
  Array.isArray(list) ? list.map((repository) => repository?.full_name).filter((name): name is string => typeof name === 'string') : [];

/**
 * Built-in handlers: installations and their repositories kept current,
 * pushes recorded, everything else acknowledged. Each only writes to the
 * store, and writes nothing twice when run again. A push is recorded on its
 * own (keyed by its job) and an event the gateway only acknowledges writes
 * nothing, so any order serves them; installation events change what the
 * next one builds on, and run in the order they came.
 */
export function registerGithubHandlers(jobs: RegistrationApi['jobs']): void {
  jobs.handle('github.push', (payload, { send, jobId }) => {
    const { body, deliveryId, hookId } = payload as DeliveryPayload;
    const commits = Array.isArray(body.commits) ? body.commits.length : 0;
    const head = body.head_commit?.id ?? body.after ?? null;
    // A job run again (its lease lapsed while it ran) records its push once.
    send(`INSERT INTO pushes (job_id, hook_id, delivery_id, repository, ref, head_commit, commit_count, received_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
      ON CONFLICT (job_id) DO NOTHING`, jobId, hookId ?? '', deliveryId, body.repository.full_name, body.ref, head, commits, now());
    return { repository: body.repository.full_name, ref: body.ref, headCommit: head, commits };
  }, { transactional: true });
  jobs.handle('github.installation', async (payload, { db }) => {
    const { body } = payload as DeliveryPayload;
    const action = String(body.action);
    await db.transaction(async (tx) => {
      await recordInstallation(tx, body.installation, { suspended: action === 'suspend', deleted: action === 'deleted' });
      if (action === 'created') {
        for (const name of repositoryNames(body.repositories)) await tx.run(ADD_REPOSITORY, body.installation.id, name, now());
      }
      if (action === 'deleted') await tx.run('DELETE FROM installation_repositories WHERE installation_id = ?', body.installation.id);
    });
    return { installation: body.installation.id, action };
  }, { transactional: true, ordered: true });
  jobs.handle('github.installation_repositories', async (payload, { db }) => {
    const { body } = payload as DeliveryPayload;
    const added = repositoryNames(body.repositories_added);
    const removed = repositoryNames(body.repositories_removed);
    await db.transaction(async (tx) => {
      await recordInstallation(tx, body.installation);
      for (const name of added) await tx.run(ADD_REPOSITORY, body.installation.id, name, now());
      for (const name of removed) await tx.run('DELETE FROM installation_repositories WHERE installation_id = ? AND full_name = ?', body.installation.id, name);
    });
    return { installation: body.installation.id, added, removed };
  }, { transactional: true, ordered: true });
  jobs.handle('github.*', (payload) => {
    const { event, body } = payload as DeliveryPayload;
    return { event, action: typeof body.action === 'string' ? body.action : null, acknowledged: true };
  }, { transactional: true });
}
