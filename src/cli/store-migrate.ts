/**
 * `gateway store migrate --to postgres://...`: a profile's SQLite state copied
 * into an empty PostgreSQL database, in one transaction (all of it or
 * nothing), then the profile switched to it. The SQLite file is left as it
 * was: it is the way back.
 */
import { existsSync } from 'node:fs';
import { applyConfigChange } from './config-access.ts';
import { inspectDaemon } from '../shared/daemon-lock.ts';
import { GatewayError } from '../shared/errors.ts';
import type { ProfilePaths } from '../shared/profile.ts';
import type { SecretStore } from '../shared/secrets/secret-store.ts';
import { redactedUrl } from '../shared/store-url.ts';

export interface StoreMigrateResult {
  profile: string;
  from: string;
  to: string;
  schemaVersion: number;
  tables: number;
  rows: number;
  /** Whether the profile now uses the database (store.url set). */
  switched: boolean;
  /** Whether the URL's password went to the secret store as store.password. */
  passwordStored: boolean;
}

/** The copy itself (the store's code, server/store/copy-to-postgres.ts). */
export type CopyStore = (path: string, url: string, password: string | undefined, progress: (line: string) => void) => Promise<{ schemaVersion: number; tables: number; rows: number }>;

/** The URL as config keeps it (no password), and the password it carried, if any. */
function splitPassword(url: string): { url: string; password?: string } {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new GatewayError(`--to is not a URL: give postgres://user@host[:port]/database.`, { kind: 'invalid' });
  }
  if (parsed.protocol !== 'postgres:' && parsed.protocol !== 'postgresql:') {
    throw new GatewayError(`--to must be a postgres:// URL, not ${parsed.protocol}//.`, { kind: 'invalid' });
  }
  const password = parsed.password ? decodeURIComponent(parsed.password) : parsed.searchParams.get('password') ?? undefined;
  parsed.password = '';
  parsed.searchParams.delete('password');
  return { url: parsed.toString(), ...(password ? { password } : {}) };
}

export async function migrateToPostgres(paths: ProfilePaths, target: string, secrets: SecretStore, copy: CopyStore, progress: (line: string) => void): Promise<StoreMigrateResult> {
  const { url, password: given } = splitPassword(target);
  const daemon = inspectDaemon(paths);
  if (daemon.state === 'running' || daemon.state === 'starting') {
    throw new GatewayError(`The daemon of profile ${paths.name} is running: its state would change while it is copied.`, { hints: [`gateway stop --profile ${paths.name}   # then run this again`] });
  }
  if (!existsSync(paths.db)) throw new GatewayError(`Profile ${paths.name} has no state to migrate (${paths.db} does not exist).`, { kind: 'not_found' });
  const copied = await copy(paths.db, url, given ?? (await secrets.get('store.password')), progress);
  if (given) await secrets.set('store.password', given);
  await applyConfigChange(paths, 'store.url', url);
  return { profile: paths.name, from: paths.db, to: redactedUrl(url), ...copied, switched: true, passwordStored: Boolean(given) };
}
