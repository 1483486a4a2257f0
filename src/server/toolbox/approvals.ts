/**
 * Which commands exec runs without asking under the allowlist approval. The
 * commands that ask wait for an operator in the store: src/server/approvals/.
 */
import { allowlistVerdict } from './allowlist.ts';

/**
 * Whether a command runs without asking under the allowlist patterns: its
 * words, as /bin/sh will run them, match a pattern's, and no word that runs
 * another command is covered by a `*` (see allowlist.ts).
 */
export function allowedCommand(command: string, patterns: readonly string[]): boolean {
  return allowlistVerdict(command, patterns).allowed;
}
