import { usageError } from '../shared/errors.ts';
import { canPrompt } from './prompt.ts';

const MAX_SECRET_BYTES = 64 * 1024;

/**
 * Reads a secret: from stdin when it is piped (one trailing newline stripped),
 * or from a hidden prompt when a person is at a terminal. Never from a flag,
 * which would land in shell history.
 */
export async function readSecretValue(name: string): Promise<string> {
  let value: string;
  if (process.stdin.isTTY) {
    if (!canPrompt()) throw usageError(`No value for ${name}: pipe it on stdin, for example: printf %s "$VALUE" | gateway secrets set ${name}`);
    const { password } = await import('@inquirer/prompts');
    value = await password({ message: `Value for ${name}`, mask: true });
  } else {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of process.stdin) {
      size += (chunk as Buffer).length;
      if (size > MAX_SECRET_BYTES) throw usageError(`The value for ${name} is larger than ${MAX_SECRET_BYTES} bytes.`);
      chunks.push(chunk as Buffer);
    }
    value = Buffer.concat(chunks).toString('utf8').replace(/\r?\n$/, '');
  }
  if (value.length === 0) throw usageError(`The value for ${name} is empty; nothing was stored.`);
  if (value.includes('\0')) throw usageError(`The value for ${name} contains a NUL byte; nothing was stored.`);
  return value;
}
