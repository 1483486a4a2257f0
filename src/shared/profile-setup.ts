import { existsSync } from 'node:fs';
import { GatewayError, usageError } from './errors.ts';
import { SECRET_BACKENDS, type SecretBackendName } from './config/schema.ts';
import { getPath } from './config/keys.ts';
import { loadConfig, openConfigStore, readRawConfig } from './config/profile-config.ts';
import type { ProfilePaths } from './profile.ts';
import { assertPortFree, ensureProfileDir, freeDerivedPort } from './profiles.ts';
import { KeychainSecretStore } from './secrets/keychain-store.ts';
import { keychainService, openSecretStore, type SecretStore } from './secrets/secret-store.ts';

export interface ProfileSetup {
  created: boolean;
  backend: SecretBackendName;
  /** Said once, when the profile falls back to the file store. */
  warning?: string;
}

function parseBackend(value: string | undefined, origin: string): SecretBackendName | undefined {
  if (value === undefined || value === '') return undefined;
  if (!(SECRET_BACKENDS as readonly string[]).includes(value)) {
    throw usageError(`${origin} must be one of ${SECRET_BACKENDS.join(', ')} (got ${JSON.stringify(value)}).`);
  }
  return value as SecretBackendName;
}

/** Picks the keychain where one answers, else the 0600 file, with the warning to show once. */
export async function chooseSecretBackend(paths: ProfilePaths): Promise<{ backend: SecretBackendName; warning?: string }> {
  const probe = await new KeychainSecretStore(keychainService(paths)).probe();
  if (probe.state === 'available') return { backend: 'keychain' };
  return {
    backend: 'file',
    warning: `No OS keychain is reachable (${probe.reason}); profile "${paths.name}" keeps its secrets in ${paths.secrets} (mode 0600).`,
  };
}

/**
 * Makes sure a profile exists: its folder (0700), its port when the derived one
 * is taken, and its secret backend, chosen once and recorded in config.json.
 */
export async function ensureProfile(
  paths: ProfilePaths,
  options: { backend?: string; port?: number } = {},
): Promise<ProfileSetup> {
  const existed = existsSync(paths.config);
  // Validated first: an invalid file is reported (exit 78), never rewritten.
  const { raw } = loadConfig(paths);
  const recorded = getPath(raw, 'secrets.backend') as SecretBackendName | undefined;
  const requested = parseBackend(options.backend, '--secrets') ?? parseBackend(process.env.GATEWAY_SECRETS_BACKEND, 'GATEWAY_SECRETS_BACKEND');
  if (recorded && (!requested || requested === recorded) && options.port === undefined) {
    return { created: false, backend: recorded };
  }
  if (recorded && requested && requested !== recorded) {
    throw new GatewayError(`Profile "${paths.name}" keeps its secrets in the ${recorded} store; it cannot switch to ${requested}.`, {
      hints: ['create a new profile with the store you want: gateway profiles create <name> --secrets <keychain|file>'],
    });
  }
  if (options.port !== undefined) assertPortFree(options.port, paths.name, paths.home);
  const port = options.port ?? (getPath(raw, 'gateway.port') === undefined ? freeDerivedPort(paths.name, paths.home) : undefined);
  ensureProfileDir(paths);
  const choice = recorded ? { backend: recorded } : requested ? { backend: requested } : await chooseSecretBackend(paths);
  const next = structuredClone(raw) as { secrets?: Record<string, unknown>; gateway?: Record<string, unknown> };
  next.secrets = { ...next.secrets, backend: choice.backend };
  if (port !== undefined) next.gateway = { ...next.gateway, port };
  const store = await openConfigStore(paths);
  store.store = next as Record<string, unknown>;
  return { created: !existed, ...choice };
}

/** The secret store a profile recorded; undefined when it has none yet. */
export function profileSecretStore(paths: ProfilePaths): SecretStore | undefined {
  const backend = getPath(readRawConfig(paths), 'secrets.backend') as SecretBackendName | undefined;
  return backend ? openSecretStore(paths, backend) : undefined;
}
