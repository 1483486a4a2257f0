import { readFileSync } from 'node:fs';
import { configError, usageError } from '../errors.ts';
import type { ProfilePaths } from '../profile.ts';
import { assertPortFree } from '../profiles.ts';
import { configSchema } from './schema.ts';
import {
  assertValidValue, assertWritableKey, deletePath, documentProblems, effectiveConfig, getPath, needsReload, needsRestart, setPath,
} from './keys.ts';
import type { ConfigChange } from '../protocol/results.ts';
import type { GatewayConfig } from './types.ts';

export interface LoadedConfig {
  /** What config.json holds (an empty object when there is no file). */
  raw: Record<string, unknown>;
  /** The same with every default filled in. */
  effective: GatewayConfig;
}

/** Reads config.json without changing it. A file that is not JSON is reported with its path. */
export function readRawConfig(paths: ProfilePaths): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(paths.config, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return {};
    throw configError(`Cannot read ${paths.config}: ${(error as Error).message}.`);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (error) {
    throw configError(`${paths.config} is not valid JSON (${(error as Error).message}). The file was left as it is.`, [
      `fix or remove ${paths.config}, then run the command again`,
    ]);
  }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    throw configError(`${paths.config} must hold a JSON object. The file was left as it is.`);
  }
  return raw as Record<string, unknown>;
}

/** Reads and validates config.json against the schema; invalid files are reported, never rewritten. */
export function loadConfig(paths: ProfilePaths): LoadedConfig {
  const raw = readRawConfig(paths);
  const problems = documentProblems(raw);
  if (problems.length > 0) {
    throw configError(`${paths.config} is invalid: ${problems.join('; ')}. The file was left as it is.`, [
      'gateway config unset <key>   # drops a bad setting',
      `or edit ${paths.config}`,
    ]);
  }
  return { raw, effective: effectiveConfig(raw) };
}

/** Reads config.json and fills defaults, skipping schema validation: for fast read-only commands. */
export const readEffectiveConfig = (paths: ProfilePaths): GatewayConfig => effectiveConfig(readRawConfig(paths));

/**
 * conf's atomic writer hooks every signal and re-raises it after its own
 * clean-up, which would turn one SIGTERM into the "second signal" that makes a
 * draining daemon exit at once. The process owns its signals: the hooks the
 * import installs are removed again.
 */
async function importConfWithoutSignalHooks() {
  const signals = () => process.eventNames().filter((name): name is string => typeof name === 'string' && name.startsWith('SIG'));
  const before = new Map(signals().map((name) => [name, new Set(process.listeners(name as NodeJS.Signals))]));
  const conf = await import('conf');
  for (const name of signals()) {
    for (const listener of process.listeners(name as NodeJS.Signals)) {
      if (!before.get(name)?.has(listener)) process.removeListener(name, listener);
    }
  }
  return conf;
}

/** The conf store behind config.json: atomic writes, mode 0600, validated against the schema on every write. */
export async function openConfigStore(paths: ProfilePaths) {
  const { default: Conf } = await importConfWithoutSignalHooks();
  return new Conf<Record<string, unknown>>({
    cwd: paths.dir,
    configName: 'config',
    schema: configSchema.properties as never,
    rootSchema: { additionalProperties: false },
    ajvOptions: { useDefaults: false, strict: false },
    configFileMode: 0o600,
    clearInvalidConfig: false,
    accessPropertiesByDotNotation: true,
  });
}

export type { ConfigChange };

/**
 * Sets (or, with value undefined, unsets) one key: the key and value are checked
 * first, then the whole document, and only then is the file written, atomically.
 */
export async function changeConfig(paths: ProfilePaths, key: string, value: unknown): Promise<ConfigChange> {
  assertWritableKey(key);
  if (value !== undefined) assertValidValue(key, value);
  if (key === 'gateway.port' && typeof value === 'number') assertPortFree(value, paths.name, paths.home);
  const { raw } = loadConfig(paths);
  const previous = getPath(raw, key);
  const next = structuredClone(raw);
  if (value === undefined) deletePath(next, key);
  else setPath(next, key, value);
  const problems = documentProblems(next);
  if (problems.length > 0) throw usageError(`Invalid setting: ${problems.join("; ")}.`);
  const store = await openConfigStore(paths);
  store.store = next;
  return { key, value: getPath(effectiveConfig(next), key), previous, restartRequired: needsRestart(key), reloadRequired: needsReload(key) };
}
