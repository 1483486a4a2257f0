import { existsSync } from 'node:fs';
import { Flags } from '@oclif/core';
import { BaseCommand } from '../cli/base-command.ts';
import { usageError } from '../shared/errors.ts';

export interface LogsResult {
  profile: string;
  file: string;
  entries: unknown[];
}

export default class Logs extends BaseCommand<LogsResult> {
  static override summary = 'Show the daemon\'s log.';
  static override description = 'Lines are rendered for people on a terminal and printed as JSON lines otherwise (or with --raw). -f follows the file across rotations.';
  static override examples = ['<%= config.bin %> logs -n 50', '<%= config.bin %> logs --profile staging -f', '<%= config.bin %> logs --json -n 10'];
  static override flags = {
    lines: Flags.integer({ char: 'n', description: 'how many of the last lines to show', default: 50, min: 0 }),
    follow: Flags.boolean({ char: 'f', description: 'keep printing lines as they are written' }),
    raw: Flags.boolean({ description: 'print the JSON lines as they are in the file' }),
  };

  async run(): Promise<LogsResult> {
    const { flags } = await this.parse(Logs);
    if (flags.follow && this.jsonEnabled()) {
      throw usageError('--json prints one document and cannot follow; use --follow --raw for JSON lines.');
    }
    const profile = this.existingProfile(flags.profile);
    const { lastLines, renderLogLine } = await import('../cli/log-tail.ts');
    if (!existsSync(profile.paths.log) && !flags.follow) {
      // A daemon run under systemd (or with --log-file off) logs to stdout only: its supervisor keeps the log.
      process.stderr.write(`Profile "${profile.name}" has no log file: its daemon logs to stdout (under systemd: journalctl --user -u gateway-${profile.name}).\n`);
    }
    const lines = lastLines(profile.paths.log, flags.lines);
    const human = !flags.raw && Boolean(process.stdout.isTTY);
    const color = human && !process.env.NO_COLOR;
    const print = (line: string) => process.stdout.write(`${human ? renderLogLine(line, color) : line}\n`);
    if (!this.jsonEnabled()) lines.forEach(print);
    if (flags.follow) {
      const { followFile } = await import('../cli/log-follow.ts');
      await followFile(profile.paths.log, print);
    }
    return {
      profile: profile.name,
      file: profile.paths.log,
      entries: lines.map((line) => {
        try {
          return JSON.parse(line) as unknown;
        } catch {
          return { msg: line };
        }
      }),
    };
  }
}
