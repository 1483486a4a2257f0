import { readFileSync } from 'node:fs';
import { configError } from '../errors.ts';
import type { ProfilePaths } from '../profile.ts';

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
      `fix ${paths.config}, then run the command again`,
      `or set it aside and start from defaults: mv ${paths.config} ${paths.config}.broken   # the profile keeps its secret store and port (profile.json)`,
    ]);
  }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    throw configError(`${paths.config} must hold a JSON object. The file was left as it is.`);
  }
  return raw as Record<string, unknown>;
}
