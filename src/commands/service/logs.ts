import { Flags } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
import { GatewayError, usageError } from '../../shared/errors.ts';

export default class ServiceLogs extends BaseCommand<{ exitCode: number }> {
  static override summary = 'Show the journal of the profile\'s service (journalctl -u <unit>).';
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
    const args = [...(record.scope === 'user' ? ['--user'] : []), '-u', record.unit, '-n', String(flags.lines), '--no-pager', ...(flags.follow ? ['-f'] : [])];
    const { spawnSync } = await import('node:child_process');
    const result = spawnSync('journalctl', args, { stdio: 'inherit' });
    if (result.error) throw new GatewayError(`journalctl is not available (${(result.error as NodeJS.ErrnoException).code}).`);
    process.exitCode = result.status ?? 1;
    return { exitCode: process.exitCode };
  }
}
