import { BaseCommand } from '../../cli/base-command.ts';
import { ExitCode } from '../../shared/exit-codes.ts';

export interface ServiceStatusResult {
  profile: string;
  installed: boolean;
  unit: string | null;
  path: string | null;
  scope: 'user' | 'system' | null;
  user: string | null;
  /** What systemd says: active, inactive, failed, activating, ... */
  active: string | null;
  /** enabled, disabled, ... */
  enabled: string | null;
}

export default class ServiceStatus extends BaseCommand<ServiceStatusResult> {
  static override summary = 'Whether the profile runs as a systemd service, and what systemd says of it.';
  static override description = 'Exits 0 when the service is active, 3 when it is installed but not running, 5 when none is installed.';
  static override examples = ['<%= config.bin %> service status', '<%= config.bin %> service status --json'];

  async run(): Promise<ServiceStatusResult> {
    const { flags } = await this.parse(ServiceStatus);
    const profile = this.existingProfile(flags.profile);
    const service = await import('../../cli/service.ts');
    const record = service.serviceOf(profile.paths);
    if (!record) {
      this.say(`Profile "${profile.name}" has no service installed (gateway service install --profile ${profile.name}).`);
      process.exitCode = ExitCode.notFound;
      return { profile: profile.name, installed: false, unit: null, path: null, scope: null, user: null, active: null, enabled: null };
    }
    const { active, enabled } = service.unitState(record);
    this.say([
      `Unit:    ${record.unit} (${record.scope}${record.scope === 'system' ? `, runs as ${record.user}` : ''})`,
      `File:    ${record.path}`,
      `Active:  ${active}`,
      `Enabled: ${enabled}`,
    ].join('\n'));
    if (active !== 'active') process.exitCode = ExitCode.notRunning;
    return { profile: profile.name, installed: true, unit: record.unit, path: record.path, scope: record.scope, user: record.user, active, enabled };
  }
}
