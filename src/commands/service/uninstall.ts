import { BaseCommand } from '../../cli/base-command.ts';

export interface ServiceUninstallResult {
  profile: string;
  unit: string | null;
  removed: boolean;
}

export default class ServiceUninstall extends BaseCommand<ServiceUninstallResult> {
  static override summary = 'Stop the profile\'s service, disable it and remove its unit; the profile and its state stay.';
  static override description = 'Afterwards gateway start runs the daemon in the background as before. Uninstalling a profile with no service succeeds and says so.';
  static override examples = ['<%= config.bin %> service uninstall', '<%= config.bin %> service uninstall --profile staging --json'];

  async run(): Promise<ServiceUninstallResult> {
    const { flags } = await this.parse(ServiceUninstall);
    const profile = this.existingProfile(flags.profile);
    const service = await import('../../cli/service.ts');
    const record = service.serviceOf(profile.paths);
    if (!record) {
      service.removeServiceRecord(profile.paths);
      this.say(`Profile "${profile.name}" has no service installed.`);
      return { profile: profile.name, unit: null, removed: false };
    }
    const { stopService } = await import('../../cli/service-control.ts');
    await stopService(profile.paths, record, 30_000);
    service.manage(record, 'disable');
    (await import('node:fs')).rmSync(record.path, { force: true });
    if (record.manager === 'systemd') service.systemctl(record.scope, ['daemon-reload'], { check: false });
    service.removeServiceRecord(profile.paths);
    this.say(`Removed ${record.path}; the daemon of profile "${profile.name}" is stopped and no longer a service.`);
    return { profile: profile.name, unit: record.unit, removed: true };
  }
}
