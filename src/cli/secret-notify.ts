import { inspectDaemon } from '../shared/daemon-lock.ts';
import type { ProfilePaths } from '../shared/profile.ts';

/** Tells a running daemon that a secret changed; false when no daemon runs or it could not be told. */
export async function notifyDaemon(paths: ProfilePaths, name: string): Promise<boolean> {
  if (inspectDaemon(paths).state !== 'running') return false;
  try {
    const { connectToDaemon } = await import('./rpc-client.ts');
    const client = await connectToDaemon(paths, { timeoutMs: 5000 });
    try {
      await client.call('secrets.changed', { name }, 5000);
      return true;
    } finally {
      client.close();
    }
  } catch {
    return false;
  }
}
