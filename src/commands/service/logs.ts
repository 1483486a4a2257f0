import { Flags } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
import { GatewayError, usageError } from '../../shared/errors.ts';

export default class ServiceLogs extends BaseCommand<{ exitCode: number }> {
  static override summary = 'Show the log of the profile\'s service (journalctl -u <unit>; the log file under launchd).';
  static override examples = ['<%= config.bin %> service logs -n 100', '<%= config.bin %> service logs -f'];
  static override enableJsonFlag = false;
  static override flags = {
    lines: Flags.integer({ char: 'n', description: 'how many of the last lines to show', default: 50, min: 0 }),
    follow: Flags.boolean({ char: 'f', description: 'keep printing lines as they are written' }),
  };

  async run(): Promise<{ exitCode: number }> {
    const { flags } = await this.parse(ServiceLogs);
    const profile = this.existingProfile(flags.profile);
    const { serviceOf } = await import('../../cli/service.ts');
    const record = serviceOf(profile.paths);
    if (!record) throw usageError(`Profile "${profile.name}" has no service installed; its log is read with: gateway logs --profile ${profile.name}`);
    if (record.manager === 'launchd') {
      // Under launchd the daemon keeps its own log file.
      const { lastLines, renderLogLine } = await import('../../cli/log-tail.ts');
      for (const line of lastLines(profile.paths.log, flags.lines)) process.stdout.write(`${process.stdout.isTTY ? renderLogLine(line) : line}\n`);
      if (flags.follow) await (await import('../../cli/log-follow.ts')).followFile(profile.paths.log, (line) => process.stdout.write(`${line}\n`));
      return { exitCode: 0 };
    }
    const args = [...(record.scope === 'user' ? ['--user'] : []), '-u', record.unit, '-n', String(flags.lines), '--no-pager', ...(flags.follow ? ['-f'] : [])];
    const { spawnSync } = await import('node:child_process');
    const result = spawnSync('journalctl', args, { stdio: 'inherit' });
    if (result.error) throw new GatewayError(`journalctl is not available (${(result.error as NodeJS.ErrnoException).code}).`);
    process.exitCode = result.status ?? 1;
    return { exitCode: process.exitCode };
  }
}
