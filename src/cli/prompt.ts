import { usageError } from '../shared/errors.ts';

/** A person is there to answer only when stdin and stdout are terminals and CI is unset. */
export const canPrompt = (): boolean => Boolean(process.stdin.isTTY && process.stdout.isTTY && !process.env.CI);

/** Asks a yes/no question of a person; without one, the missing answer is a usage error naming the flag. */
export async function confirm(question: string, flag: string): Promise<boolean> {
  if (!canPrompt()) {
    throw usageError(`${question} No terminal to ask on: pass ${flag} to confirm.`);
  }
  const { confirm: ask } = await import('@inquirer/prompts');
  return ask({ message: question, default: false });
}
