/**
 * What identifies a profile beyond its settings: the secret store it keeps its
 * secrets in and the port it was given when it was made. They live in
 * profile.json, apart from config.json, so that removing or damaging the
 * settings can never move a profile to another secret store (a new gateway
 * token, stored secrets no longer read) or to another port. The secret store
 * changes only with `gateway secrets move`; a port set in config.json takes
 * precedence over the one given at creation, which stays the default.
 */
import { existsSync, readFileSync } from 'node:fs';
import { writeFileAtomic } from './atomic-file.ts';
import { SECRET_BACKENDS, type SecretBackendName } from './config/schema.ts';
import { configError } from './errors.ts';
import type { ProfilePaths } from './profile.ts';

export interface ProfileIdentity {
  /** Where the profile's secrets are kept. */
  secrets: SecretBackendName;
  /** The port the profile listens on when config.json names none. */
  port?: number;
}

const isBackend = (value: unknown): value is SecretBackendName => typeof value === 'string' && (SECRET_BACKENDS as readonly string[]).includes(value);
const isPort = (value: unknown): value is number => Number.isInteger(value) && (value as number) >= 1 && (value as number) <= 65535;

/** The identity in profile.json; undefined when the profile has none recorded there. A damaged file is an error naming it. */
export function readIdentityFile(paths: ProfilePaths): ProfileIdentity | undefined {
  let text: string;
  try {
    text = readFileSync(paths.identity, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw configError(`Cannot read ${paths.identity}: ${(error as Error).message}.`);
  }
  let parsed: { secrets?: unknown; port?: unknown } | undefined;
  try {
    parsed = JSON.parse(text) as typeof parsed;
  } catch {
    parsed = undefined;
  }
  if (!parsed || typeof parsed !== 'object' || !isBackend(parsed.secrets) || (parsed.port !== undefined && !isPort(parsed.port))) {
    throw configError(`${paths.identity} is damaged: it must hold {"secrets": "keychain" | "file", "port": <port>}. The file was left as it is.`, [
      `restore it, e.g. printf '{"secrets":"file","port":18789}' > ${paths.identity}   # the store and port the profile had`,
    ]);
  }
  return { secrets: parsed.secrets, ...(parsed.port === undefined ? {} : { port: parsed.port }) };
}

/**
 * The identity of a profile: profile.json, else (a profile made before it
 * existed) what its config.json recorded, when that is readable.
 */
export function readIdentity(paths: ProfilePaths): ProfileIdentity | undefined {
  const recorded = readIdentityFile(paths);
  if (recorded) return recorded;
  if (!existsSync(paths.config)) return undefined;
  try {
    const raw = JSON.parse(readFileSync(paths.config, 'utf8')) as { secrets?: { backend?: unknown }; gateway?: { port?: unknown } };
    const backend = raw?.secrets?.backend;
    if (!isBackend(backend)) return undefined;
    const port = raw?.gateway?.port;
    return { secrets: backend, ...(isPort(port) ? { port } : {}) };
  } catch {
    return undefined;
  }
}

/** Writes profile.json atomically (mode 0600). */
export function writeIdentity(paths: ProfilePaths, identity: ProfileIdentity): void {
  writeFileAtomic(paths.identity, `${JSON.stringify(identity, null, 2)}\n`);
}
