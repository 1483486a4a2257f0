import { randomBytes } from 'node:crypto';
import { renameSync, rmSync, writeFileSync } from 'node:fs';

/**
 * Writes a file whole or not at all: a temporary file beside it (a name of its
 * own, created exclusively), then a rename, so a reader sees the old file or
 * the new one, never a part. On failure the temporary file goes and the error
 * is thrown.
 */
export function writeFileAtomic(path: string, text: string, mode = 0o600): void {
  const temporary = `${path}.${randomBytes(6).toString('hex')}.tmp`;
  try {
    writeFileSync(temporary, text, { mode, flag: 'wx' });
    renameSync(temporary, path);
  } catch (error) {
    rmSync(temporary, { force: true });
    throw error;
  }
}
