import { existsSync } from 'node:fs';
import { GatewayError, usageError } from './errors.ts';
import { SECRET_BACKENDS, type SecretBackendName } from './config/schema.ts';
import { getPath } from './config/keys.ts';
import { loadConfig, writeConfigFile } from './config/profile-config.ts';
import { readIdentity, writeIdentity } from './profile-identity.ts';
import { derivedPort, type ProfilePaths } from './profile.ts';
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
 * is taken, and its secret store, chosen once and recorded in profile.json
 * (where removing or damaging config.json cannot change it).
 */
export async function ensureProfile(
  paths: ProfilePaths,
  options: { backend?: string; port?: number; checkedByDaemon?: boolean } = {},
): Promise<ProfileSetup> {
  const existed = existsSync(paths.config) || existsSync(paths.identity);
  // Validated first: an invalid file is reported (exit 78), never rewritten. `gateway start` leaves it to the daemon
  // it starts, which checks it (and reports a problem back the same way) before anything else, unless a file is
  // written here.
  let raw = options.checkedByDaemon ? undefined : loadConfig(paths).raw;
  const identity = readIdentity(paths);
  const recorded = identity?.secrets;
  const requested = parseBackend(options.backend, '--secrets') ?? parseBackend(process.env.GATEWAY_SECRETS_BACKEND, 'GATEWAY_SECRETS_BACKEND');
  if (recorded && requested && requested !== recorded) {
    throw new GatewayError(`Profile "${paths.name}" keeps its secrets in the ${recorded} store; it cannot switch to ${requested} here.`, {
      hints: [`gateway secrets move ${requested} --profile ${paths.name}   # moves every secret`, 'or create a new profile with the store you want: gateway profiles create <name> --secrets <keychain|file>'],
    });
  }
  if (recorded && options.port === undefined) {
    // A profile made before profile.json existed gets one now, from what its config.json recorded.
    if (!existsSync(paths.identity)) writeIdentity(paths, identity);
    return { created: false, backend: recorded };
  }
  raw ??= loadConfig(paths).raw;
  if (!recorded && !requested && (existsSync(paths.db) || existsSync(paths.secrets))) {
    // A profile with state but no record of its store: never guess (a wrong guess means a new token and unread secrets).
    if (!existsSync(paths.secrets)) {
      throw new GatewayError(`Profile "${paths.name}" has state but no record of where its secrets are kept (${paths.identity} is missing).`, {
        kind: 'invalid_config',
        hints: [`GATEWAY_SECRETS_BACKEND=keychain gateway start --profile ${paths.name}   # the store it was made with: keychain or file`],
      });
    }
  }
  if (options.port !== undefined) assertPortFree(options.port, paths.name, paths.home);
  const port = options.port ?? identity?.port ?? (getPath(raw, 'gateway.port') === undefined ? freeDerivedPort(paths.name, paths.home) ?? derivedPort(paths.name) : undefined);
  ensureProfileDir(paths);
  const choice = recorded ? { backend: recorded } : requested ? { backend: requested }
    : existsSync(paths.secrets) ? { backend: 'file' as const } : await chooseSecretBackend(paths);
  writeIdentity(paths, { secrets: choice.backend, ...(port === undefined ? {} : { port }) });
  // An explicit --port is a setting too; config.json keeps it where a user looks for it.
  if (options.port !== undefined) {
    const next = structuredClone(raw) as { gateway?: Record<string, unknown> };
    next.gateway = { ...next.gateway, port: options.port };
    writeConfigFile(paths, next as Record<string, unknown>);
  }
  return { created: !existed, ...choice };
}

/** The secret store a profile recorded; undefined when it has none yet. */
export function profileSecretStore(paths: ProfilePaths): SecretStore | undefined {
  const backend = readIdentity(paths)?.secrets;
  return backend ? openSecretStore(paths, backend) : undefined;
}
