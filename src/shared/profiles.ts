import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { GatewayError, notFoundError, usageError } from './errors.ts';
import { readIdentity } from './profile-identity.ts';
import { readRawConfig } from './config/raw-config.ts';
import { getPath } from './config/keys.ts';
import {
  assertProfileName, currentProfileFile, DEFAULT_PROFILE, derivedPort, gatewayHome, isValidProfileName,
  profilePaths, type ProfilePaths,
} from './profile.ts';
import { join } from 'node:path';

/** Names of every profile under GATEWAY_HOME; `default` is always among them. */
export function listProfileNames(home = gatewayHome()): string[] {
  let names: string[] = [];
  try {
    names = readdirSync(join(home, 'profiles'), { withFileTypes: true })
      .filter((entry) => entry.isDirectory() && isValidProfileName(entry.name))
      .map((entry) => entry.name);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  if (!names.includes(DEFAULT_PROFILE)) names.push(DEFAULT_PROFILE);
  return names.sort((a, b) => (a === DEFAULT_PROFILE ? -1 : b === DEFAULT_PROFILE ? 1 : a.localeCompare(b)));
}

export const profileExists = (name: string, home = gatewayHome()): boolean =>
  name === DEFAULT_PROFILE || existsSync(profilePaths(name, home).dir);

/** The profile a command acts on: --profile, else GATEWAY_PROFILE, else `profiles use`, else default. */
export function selectProfileName(flag: string | undefined, env = process.env, home = gatewayHome(env)): { name: string; source: string } {
  if (flag) return { name: assertProfileName(flag), source: '--profile' };
  if (env.GATEWAY_PROFILE) return { name: assertProfileName(env.GATEWAY_PROFILE), source: 'GATEWAY_PROFILE' };
  const saved = savedProfile(home);
  if (saved) return { name: saved, source: 'gateway profiles use' };
  return { name: DEFAULT_PROFILE, source: 'default' };
}

export function savedProfile(home = gatewayHome()): string | undefined {
  try {
    const name = readFileSync(currentProfileFile(home), 'utf8').trim();
    return isValidProfileName(name) ? name : undefined;
  } catch {
    return undefined;
  }
}

/** Resolves a profile that must already exist (exit 5 otherwise). */
export function requireProfile(name: string, home = gatewayHome()): ProfilePaths {
  if (!profileExists(name, home)) {
    throw notFoundError(`Profile "${name}" does not exist.`, [`gateway profiles create ${name}`, 'gateway profiles list']);
  }
  return profilePaths(name, home);
}

/** Creates the profile folder (0700) when missing; returns its paths. */
export function ensureProfileDir(paths: ProfilePaths): ProfilePaths {
  mkdirSync(paths.dir, { recursive: true, mode: 0o700 });
  const mode = statSync(paths.dir).mode & 0o777;
  if (mode !== 0o700) chmodSync(paths.dir, 0o700);
  return paths;
}

/** The port a profile listens on when no flag or variable overrides it. */
export function configuredPort(name: string, home = gatewayHome()): number {
  const paths = profilePaths(name, home);
  const port = existsSync(paths.config) ? getPath(readRawConfig(paths), 'gateway.port') : undefined;
  return typeof port === 'number' ? port : readIdentity(paths)?.port ?? derivedPort(name);
}

/** Which other profile, if any, is configured for a port. Unreadable configs are skipped. */
export function profileUsingPort(port: number, except: string, home = gatewayHome()): string | undefined {
  for (const name of listProfileNames(home)) {
    if (name === except) continue;
    try {
      if (configuredPort(name, home) === port) return name;
    } catch {
      // An unreadable config of another profile is that profile's problem, reported when it is used.
    }
  }
  return undefined;
}

export function assertPortFree(port: number, profile: string, home = gatewayHome()): void {
  const owner = profileUsingPort(port, profile, home);
  if (owner) {
    throw usageError(`Port ${port} is already used by profile "${owner}".`, [
      `choose another port, or change that profile's: gateway config set gateway.port <port> --profile ${owner}`,
    ]);
  }
}

/** A derived port for a new profile that no other profile uses; undefined when the plain derived port is free. */
export function freeDerivedPort(name: string, home = gatewayHome()): number | undefined {
  for (let attempt = 0; attempt < 64; attempt++) {
    const port = derivedPort(name, attempt);
    if (!profileUsingPort(port, name, home)) return attempt === 0 ? undefined : port;
  }
  throw new GatewayError(`No free port could be derived for profile "${name}".`, {
    kind: 'invalid',
    hints: [`gateway profiles create ${name} --port <port>`],
  });
}
