import type { SecretBackendName } from '../config/schema.ts';

/** One interface for every place a profile's secrets can live. */
export interface SecretStore {
  readonly backend: SecretBackendName;
  /** Where the secrets are, for status output (never a value). */
  readonly location: string;
  get(name: string): Promise<string | undefined>;
  set(name: string, value: string): Promise<void>;
  delete(name: string): Promise<boolean>;
  list(): Promise<string[]>;
  /** Removes every secret of the profile. */
  clear(): Promise<void>;
}
