import { createHash } from 'node:crypto';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { usageError } from './errors.ts';

export const DEFAULT_PROFILE = 'default';
export const DEFAULT_PORT = 18789;
/** Derived ports stay below the kernel's ephemeral range (32768+) so they do not collide with outgoing connections. */
export const DERIVED_PORT_MIN = 20000;
export const DERIVED_PORT_MAX = 32767;

const PROFILE_NAME = /^[a-z0-9][a-z0-9_-]{0,31}$/;

export function isValidProfileName(name: string): boolean {
  return PROFILE_NAME.test(name);
}

export function assertProfileName(name: string): string {
  if (!isValidProfileName(name)) {
    throw usageError(
      `Invalid profile name ${JSON.stringify(name)}: use 1-32 characters of a-z, 0-9, "_" and "-", starting with a letter or digit.`,
      ['gateway profiles list'],
    );
  }
  return name;
}

/** GATEWAY_HOME, else $XDG_CONFIG_HOME/gateway, else ~/.config/gateway. */
export function gatewayHome(env: NodeJS.ProcessEnv = process.env): string {
  if (env.GATEWAY_HOME) return resolve(env.GATEWAY_HOME);
  const xdg = env.XDG_CONFIG_HOME || join(homedir(), '.config');
  return resolve(xdg, 'gateway');
}

export interface ProfilePaths {
  name: string;
  home: string;
  dir: string;
  config: string;
  db: string;
  log: string;
  lock: string;
  secrets: string;
  /** profile.json: the secret store and port the profile was made with. */
  identity: string;
}

export function profilePaths(name: string, home = gatewayHome()): ProfilePaths {
  const dir = join(home, 'profiles', name);
  return {
    name,
    home,
    dir,
    config: join(dir, 'config.json'),
    db: join(dir, 'state.db'),
    log: join(dir, 'gateway.log'),
    lock: join(dir, 'daemon.json'),
    secrets: join(dir, 'secrets.json'),
    identity: join(dir, 'profile.json'),
  };
}

/** File in GATEWAY_HOME holding the profile chosen with `gateway profiles use`. */
export const currentProfileFile = (home = gatewayHome()): string => join(home, 'current-profile');

/** A stable port for a named profile, so each profile keeps its port without configuration. */
export function derivedPort(name: string, attempt = 0): number {
  if (name === DEFAULT_PROFILE && attempt === 0) return DEFAULT_PORT;
  const digest = createHash('sha256').update(attempt === 0 ? name : `${name}#${attempt}`).digest();
  const span = DERIVED_PORT_MAX - DERIVED_PORT_MIN + 1;
  return DERIVED_PORT_MIN + (digest.readUInt32BE(0) % span);
}

/** Short, stable id of a GATEWAY_HOME, so keychain entries of two homes never collide. */
export const homeId = (home = gatewayHome()): string =>
  createHash('sha256').update(home).digest('hex').slice(0, 12);
