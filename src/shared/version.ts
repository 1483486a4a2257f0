import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

let root: string | undefined;

/**
 * The gateway's install folder (the one with package.json), found upward from
 * this file: the same answer from `src/`, `dist/` and the bundled daemon in
 * `dist/daemon/`, which sit at different depths.
 */
export function packageRoot(): string {
  if (root !== undefined) return root;
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json'))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error(`no package.json above ${fileURLToPath(import.meta.url)}`);
    dir = parent;
  }
  root = dir;
  return root;
}

let cached: string | undefined;

/** The package version, read once from the install's package.json. */
export function gatewayVersion(): string {
  cached ??= (JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { version: string }).version;
  return cached;
}

/** Path of the `gateway` executable, used to spawn the daemon. */
export const gatewayBin = (): string => join(packageRoot(), 'bin', 'run.js');
