import type { Logger } from 'pino';
import type { GatewayConfig } from '../../shared/config/types.ts';
import type { ProfilePaths } from '../../shared/profile.ts';
import type { SecretStore } from '../../shared/secrets/secret-store.ts';
import { daemonApplicationName, hasPassword, redactedUrl } from '../../shared/store-url.ts';
import { Store } from './database.ts';
import { PostgresCoordinator } from './postgres-coordinator.ts';
import { unreachableStore } from './postgres-engine.ts';

/**
 * The profile's SQLite file, or the PostgreSQL database named by
 * GATEWAY_STORE_URL (which may carry its password: the environment is never
 * stored) or store.url (whose password is the secret store.password), with the
 * connection the daemons sharing it coordinate over.
 */
export async function openStore(options: { paths: ProfilePaths; config: GatewayConfig; secrets: SecretStore; instanceId: string; logger: Logger }): Promise<Store> {
  const { paths, config, instanceId, logger } = options;
  const url = process.env.GATEWAY_STORE_URL || config.store.url;
  const synchronous = config.store.synchronous;
  if (!url) return Store.open({ path: paths.db, synchronous });
  const password = hasPassword(url) ? undefined : await options.secrets.get('store.password');
  const applicationName = daemonApplicationName(paths.name, instanceId);
  const store = await Store.open({ path: paths.db, synchronous, url, password, applicationName, poolSize: config.store.connections });
  try {
    store.coordinator = await PostgresCoordinator.open({ url, password, instanceId, applicationName, logger });
  } catch (error) {
    await store.close();
    throw unreachableStore(url, error);
  }
  logger.info({ store: redactedUrl(url) }, 'store on PostgreSQL');
  return store;
}
