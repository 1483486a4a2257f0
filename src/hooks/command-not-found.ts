import type { Hook } from '@oclif/core';
import { suggestions } from '../shared/suggest.ts';
import { errorJson, errorText, usageError } from '../shared/errors.ts';

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
