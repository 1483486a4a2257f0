import { writeFileAtomic } from '../atomic-file.ts';
import { configError, GatewayError, usageError } from '../errors.ts';
import type { ProfilePaths } from '../profile.ts';
import { assertPortFree } from '../profiles.ts';
import { readRawConfig } from './raw-config.ts';
import {
  assertWritableKey, deletePath, documentProblems, effectiveConfig, getPath, keyOfProblem, needsReload, needsRestart, problemsOf, setPath,
} from './keys.ts';
import type { ConfigChange } from '../protocol/results.ts';
import type { GatewayConfig } from './types.ts';
import { readIdentity } from '../profile-identity.ts';

export { readRawConfig };

export interface LoadedConfig {
  /** What config.json holds (an empty object when there is no file). */
  raw: Record<string, unknown>;
  /** The same with every default filled in. */
  effective: GatewayConfig;
}

/** Reads and validates config.json against the schema; invalid files are reported, never rewritten. */
export function loadConfig(paths: ProfilePaths): LoadedConfig {
  const raw = readRawConfig(paths);
  const problems = documentProblems(raw);
  if (problems.length > 0) {
    throw configError(`${paths.config} is invalid: ${problems.join('; ')}. The file was left as it is.`, [
      ...problems.map((problem) => `gateway config unset ${keyOfProblem(problem)}   # drops the bad setting`),
      `or edit ${paths.config}`,
    ]);
  }
  return { raw, effective: withIdentity(paths, effectiveConfig(raw)) };
}

/** Reads config.json and fills defaults, skipping schema validation: for fast read-only commands. */
export const readEffectiveConfig = (paths: ProfilePaths): GatewayConfig => withIdentity(paths, effectiveConfig(readRawConfig(paths)));

/** The profile's secret store and creation port (profile.json) fill what config.json leaves unset. */
function withIdentity(paths: ProfilePaths, config: GatewayConfig): GatewayConfig {
  const identity = readIdentity(paths);
  if (!identity) return config;
  return {
    ...config,
    gateway: { ...config.gateway, port: config.gateway.port ?? identity.port },
    secrets: { ...config.secrets, backend: identity.secrets },
  };
}

/**
 * Writes config.json whole: a temporary file (mode 0600) renamed over it, so a
 * reader sees the old file or the new one, never a part. The caller has
 * checked the document.
 */
export function writeConfigFile(paths: ProfilePaths, document: Record<string, unknown>): void {
  writeFileAtomic(paths.config, `${JSON.stringify(document, null, '\t')}\n`);
}

export type { ConfigChange };

/**
 * Sets (or, with value undefined, unsets) one key: the key and value are checked
 * first, then the whole document, and only then is the file written, atomically.
 */
export async function changeConfig(paths: ProfilePaths, key: string, value: unknown, options: { check?: (next: GatewayConfig) => string[] } = {}): Promise<ConfigChange> {
  return (await changeConfigKeys(paths, [{ key, value }], options))[0]!;
}

/** Why changes were refused: each problem, with the key it names. */
export class ConfigRefused extends GatewayError {
  readonly problems: { key: string; message: string }[];
  constructor(error: GatewayError, problems: string[]) {
    const named = problems.map((problem) => ({ key: keyOfProblem(problem), message: problem }));
    // Each problem names its key: the Control UI shows it beside the field.
    super(error.message, { kind: error.kind, hints: error.hints, details: { problems: named } });
    this.problems = named;
  }
}

/**
 * Sets or unsets several keys at once: each is checked, then the document
 * they make together, and the file is written once, or not at all. With
 * dryRun nothing is written.
 */
export async function changeConfigKeys(paths: ProfilePaths, changes: readonly { key: string; value: unknown }[], options: { check?: (next: GatewayConfig) => string[]; dryRun?: boolean } = {}): Promise<ConfigChange[]> {
  // A file that breaks the schema can still be changed, as long as the change leaves it valid: that is how it is mended.
  const raw = readRawConfig(paths);
  const next = structuredClone(raw);
  const valueProblems: string[] = [];
  for (const { key, value } of changes) {
    // Removing what the file holds is always possible, even a key the schema does not know (that may be what breaks it).
    if (value !== undefined || getPath(raw, key) === undefined) assertWritableKey(key);
    if (value !== undefined) valueProblems.push(...problemsOf(key, value));
    if (key === 'gateway.port' && typeof value === 'number' && valueProblems.length === 0) assertPortFree(value, paths.name, paths.home);
    if (value === undefined) deletePath(next, key);
    else setPath(next, key, value);
  }
  if (valueProblems.length > 0) {
    throw new ConfigRefused(usageError(`Invalid setting: ${valueProblems.join('; ')}. Nothing was written.`, changes.length === 1 ? [`gateway config get ${changes[0]!.key}   # shows the current value`] : undefined), valueProblems);
  }
  const before = documentProblems(raw);
  const problems = documentProblems(next);
  // Written when valid, or when it mends a broken file one problem at a time (fewer problems, none new).
  const mends = before.length > 0 && problems.length < before.length && problems.every((problem) => before.includes(problem));
  if (problems.length > 0 && !mends) {
    const broken = before.length > 0;
    throw new ConfigRefused((broken ? configError : usageError)(`${broken ? `${paths.config} would still be invalid` : 'Invalid setting'}: ${problems.join('; ')}. Nothing was written.`, broken ? [
      ...before.map((problem) => `gateway config unset ${keyOfProblem(problem)}`),
    ] : undefined), problems);
  }
  // What the running daemon's modules find wrong (a hook mapping to a job kind nothing runs) is refused like a bad value.
  const refused = problems.length === 0 && options.check ? options.check(withIdentity(paths, effectiveConfig(next))) : [];
  if (refused.length > 0) throw new ConfigRefused(usageError(`Invalid setting: ${refused.join('; ')}. Nothing was written.`), refused);
  if (!options.dryRun) writeConfigFile(paths, next);
  const effective = effectiveConfig(next);
  return changes.map(({ key }) => {
    const previous = getPath(raw, key);
    // Part of the way mended: not usable yet, and said so.
    if (problems.length > 0) return { key, value: getPath(next, key), previous, restartRequired: true, reloadRequired: false, remainingProblems: problems };
    return { key, value: getPath(effective, key), previous, restartRequired: needsRestart(key), reloadRequired: needsReload(key) };
  });
}
