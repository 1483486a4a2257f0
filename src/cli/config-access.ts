import type { ConfigChange } from '../shared/config/profile-config.ts';
import { inspectDaemon } from '../shared/daemon-lock.ts';
import type { ProfilePaths } from '../shared/profile.ts';

export interface AppliedChange extends ConfigChange {
  profile: string;
  /** daemon: written by the running daemon (one writer); file: written directly while it is stopped. */
  via: 'daemon' | 'file';
}

/** Sets or unsets a key: through the running daemon's RPC, else straight into config.json. */
export async function applyConfigChange(paths: ProfilePaths, key: string, value: unknown): Promise<AppliedChange> {
  const found = inspectDaemon(paths);
  if (found.state === 'running' || found.state === 'starting') {
    const { connectToDaemon } = await import('./rpc-client.ts');
    const client = await connectToDaemon(paths);
    try {
      const change = value === undefined
        ? await client.call('config.unset', { key })
        : await client.call('config.set', { key, value });
      return { ...change, profile: paths.name, via: 'daemon' };
    } finally {
      client.close();
    }
  }
  const { changeConfig } = await import('../shared/config/profile-config.ts');
  const change = await changeConfig(paths, key, value);
  return { ...change, profile: paths.name, via: 'file', restartRequired: false, reloadRequired: false };
}

export function describeChange(change: AppliedChange): string {
  const what = change.value === undefined ? `Unset ${change.key}` : `Set ${change.key} = ${JSON.stringify(change.value)}`;
  if (change.via === 'file') return `${what} (profile "${change.profile}"; takes effect when the daemon starts).`;
  if (change.restartRequired) return `${what}. The running daemon needs a restart to apply it: gateway restart --profile ${change.profile}`;
  if (change.reloadRequired) return `${what}. Apply it without a restart: gateway reload --profile ${change.profile}`;
  return `${what}. The running daemon applied it.`;
}
