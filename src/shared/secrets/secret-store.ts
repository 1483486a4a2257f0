import type { SecretBackendName } from '../config/schema.ts';
import { homeId, type ProfilePaths } from '../profile.ts';
import { FileSecretStore } from './file-store.ts';
import { KeychainSecretStore } from './keychain-store.ts';
import { SECRET_ENV } from './names.ts';
import type { SecretStore } from './backend.ts';

export type { SecretStore };

/** Keychain service of a profile; the home id keeps two GATEWAY_HOMEs apart. */
export const keychainService = (paths: ProfilePaths): string => `gateway:${paths.name}@${homeId(paths.home)}`;

export function openSecretStore(paths: ProfilePaths, backend: SecretBackendName): SecretStore {
  return backend === 'keychain' ? new KeychainSecretStore(keychainService(paths)) : new FileSecretStore(paths.secrets);
}

/** The value of a secret from the environment, which always wins and is never persisted. */
export function secretFromEnv(name: string, env = process.env): string | undefined {
  const variable = SECRET_ENV[name];
  const value = variable ? env[variable] : undefined;
  return value ? value : undefined;
}

/** Environment first, then the profile's store. */
export async function resolveSecret(store: SecretStore, name: string, env = process.env): Promise<string | undefined> {
  return secretFromEnv(name, env) ?? (await store.get(name));
}
