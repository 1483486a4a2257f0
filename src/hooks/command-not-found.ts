import type { Hook } from '@oclif/core';
import { errorJson, errorText, usageError } from '../shared/errors.ts';

/** Edit distance with transpositions: "stauts" is one step from "status". */
function distance(a: string, b: string): number {
  const rows = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) rows[0]![j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(rows[i - 1]![j]! + 1, rows[i]![j - 1]! + 1, rows[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) best = Math.min(best, rows[i - 2]![j - 2]! + 1);
      rows[i]![j] = best;
    }
  }
  return rows[a.length]![b.length]!;
}

/** The commands closest to what was typed, best first: close in spelling, or starting with it. */
export function suggestions(typed: string, commands: readonly string[]): string[] {
  const scored = commands
    .map((command) => {
      const score = command.startsWith(typed) ? 0.5 : distance(typed, command);
      return { command, score };
    })
    .filter(({ score }) => score <= Math.max(1, Math.min(3, Math.floor(typed.length / 3))))
    .sort((a, b) => a.score - b.score || a.command.localeCompare(b.command));
  return scored.slice(0, 3).map(({ command }) => command);
}

/**
 * An unknown command is a usage error (exit 2) that suggests what may have
 * been meant and never runs it; a known command followed by extra words is a
 * usage error naming them. With --json the error is the one document on stdout.
 */
const hook: Hook.CommandNotFound = async function ({ id, argv }) {
  const words = id.split(':');
  const commands = this.config.commands.filter((command) => !command.hidden).map((command) => command.id.replaceAll(':', ' '));
  let failure;
  // The longest known command the words start with: the rest were not expected.
  const known = words.map((_, index) => words.slice(0, words.length - index).join(':')).find((candidate) => this.config.findCommand(candidate));
  if (known) {
    const extra = words.slice(known.split(':').length);
    const command = known.replaceAll(':', ' ');
    failure = usageError(`Unexpected argument${extra.length > 1 ? 's' : ''} for gateway ${command}: ${extra.join(' ')}`, [`gateway ${command} --help`]);
  } else {
    const typed = words.join(' ');
    // Under a topic that exists, compare with its commands (`config lst` -> `config list`).
    const topic = words.length > 1 && this.config.topics.some((entry) => entry.name === words[0]) ? words[0] : undefined;
    const pool = topic ? commands.filter((command) => command.startsWith(`${topic} `)).map((command) => command.slice(topic.length + 1)) : commands;
    const close = suggestions(topic ? words.slice(1).join(' ') : typed, topic ? pool : [...new Set([...pool, ...this.config.topics.map((entry) => entry.name.replaceAll(':', ' '))])]).map((command) => (topic ? `${topic} ${command}` : command));
    failure = usageError(
      `"${typed}" is not a gateway command.${close.length > 0 ? ` Did you mean ${close.map((command) => `"gateway ${command}"`).join(' or ')}?` : ''}`,
      [topic ? `gateway ${topic} --help` : 'gateway --help'],
    );
  }
  const json = (argv ?? []).includes('--json') || process.argv.includes('--json');
  if (json) process.stdout.write(`${JSON.stringify(errorJson(failure), null, 2)}\n`);
  process.stderr.write(errorText(failure));
  process.exitCode = failure.exitCode;
  return true;
};

export default hook;
