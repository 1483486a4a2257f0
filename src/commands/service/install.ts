import { Flags } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
import type { ProfilePaths } from '../../shared/profile.ts';

export interface ServiceInstallResult {
  profile: string;
  manager: 'systemd' | 'launchd';
  unit: string;
  path: string;
  scope: 'user' | 'system';
  user: string;
  pid: number;
  url: string;
  /** Whether the user's services outlive their sessions (user units); null when logind cannot say. */
  linger: boolean | null;
  /** An unmanaged daemon that was stopped so the service manager could take over. */
  replaced?: number;
}

export default class ServiceInstall extends BaseCommand<ServiceInstallResult> {
  static override summary = 'Run the profile\'s daemon as a service (systemd; launchd on macOS): installed, enabled at boot or login, started now.';
  static override description = 'Writes a user unit gateway-<profile>.service (or, with --system --user <name>, a system unit running as that account) whose ExecStart is this node and this gateway with absolute paths, '
    + 'Restart=on-failure and RestartPreventExitStatus=78. The unit holds no secret: they stay in the secret store, or in the optional environment file service.env (mode 0600) in the profile folder. '
    + 'It first checks that the service manager answers (a user unit needs the user\'s own systemd: a login session, or lingering); when it does not, nothing is written or stopped. '
    + 'A daemon already running outside the service is stopped next, so one supervisor manages the profile; should the service fail to start, its unit and the folders made for it are removed and that daemon is started again. '
    + 'Afterwards gateway start, stop, restart and status act through systemd.';
  static override examples = ['<%= config.bin %> service install', '<%= config.bin %> service install --profile staging', 'sudo <%= config.bin %> service install --system --user gateway'];
  static override flags = {
    system: Flags.boolean({ description: 'a system unit in /etc/systemd/system (needs root and --user)' }),
    user: Flags.string({ description: 'the account a system unit runs as' }),
    timeout: Flags.integer({ description: 'milliseconds to wait for the daemon to become ready', default: 30_000, min: 100 }),
    manager: Flags.string({ description: 'the service manager (default: launchd on macOS, systemd elsewhere)', options: ['systemd', 'launchd'], hidden: true }),
  };

  async run(): Promise<ServiceInstallResult> {
    const { flags } = await this.parse(ServiceInstall);
    const profile = this.selectProfile(flags.profile);
    const service = await import('../../cli/service.ts');
    const { scope, user } = service.serviceTarget(flags);
    const manager = (flags.manager ?? service.hostManager()) as 'systemd' | 'launchd';
    // Before anything is stopped or written: a manager that cannot take the unit (no user systemd over su, no systemd at all) fails here.
    service.assertManagerReachable(manager, scope, user);
    const [{ ensureProfile }, { inspectDaemon }, { stopDaemon }, { gatewayBin }, { waitForService }] = await Promise.all([
      import('../../shared/profile-setup.ts'), import('../../shared/daemon-lock.ts'), import('../../cli/supervisor.ts'), import('../../shared/version.ts'), import('../../cli/service-control.ts'),
    ]);
    const setup = await ensureProfile(profile.paths);
    if (setup.warning) this.warning(setup.warning);

    // One supervisor per profile: a daemon started by hand gives way to the service (and comes back if the service cannot take over).
    let replaced: { pid: number; overrides: { port?: number; bind?: string } } | undefined;
    const found = inspectDaemon(profile.paths);
    if ((found.state === 'running' || found.state === 'starting') && !service.serviceOf(profile.paths)) {
      const overrides = found.record.overrides ?? {};
      const stopped = await stopDaemon(profile.paths, { force: false, timeoutMs: 15_000 });
      if (stopped.pid !== undefined) replaced = { pid: stopped.pid, overrides };
      this.note(`Stopped the daemon started by hand (pid ${stopped.pid}) for ${manager} to run it.`);
    }

    const node = process.execPath;
    const bin = gatewayBin();
    const unit = manager === 'launchd' ? service.launchdLabel(profile.paths) : service.unitName(profile.paths);
    const path = manager === 'launchd' ? `${service.launchdDirectory(scope)}/${unit}.plist` : `${service.unitDirectory(scope)}/${unit}`;
    const record = { manager, scope, unit, path, user };
    let removeUnit: (() => void) | undefined;
    let ready: Awaited<ReturnType<typeof waitForService>>;
    try {
      removeUnit = service.writeUnit(path, manager === 'launchd'
        ? service.launchdPlist({ paths: profile.paths, scope, user, node, bin, label: unit })
        : service.systemdUnit({ paths: profile.paths, scope, user, node, bin }));
      service.writeServiceRecord(profile.paths, record);
      service.manage(record, 'enable');
      ready = await waitForService(profile.paths, record, flags.timeout);
    } catch (error) {
      // Nothing half-installed: the unit and the folders made for it go, the profile is not recorded as managed,
      // and a daemon started by hand runs again as it did.
      if (removeUnit) {
        try {
          service.manage(record, 'disable', { check: false });
          if (manager === 'systemd') service.systemctl(scope, ['daemon-reload'], { check: false });
        } catch {
          // no service manager at all
        }
        removeUnit();
      }
      service.removeServiceRecord(profile.paths);
      if (replaced) await this.restoreDaemon(profile.paths, replaced);
      throw error;
    }

    const linger = manager === 'systemd' && scope === 'user' ? service.lingering(user) : undefined;
    this.say(`Installed ${path}; the daemon of profile "${profile.name}" runs under ${manager} at ${ready.url} (pid ${ready.pid})`
      + `${replaced ? `, in place of the one started by hand (pid ${replaced.pid})` : ''}.`);
    if (manager === 'systemd' && scope === 'user' && linger !== true) {
      this.warning(`Lingering is ${linger === false ? 'off' : 'unknown'} for ${user}: systemd stops a user's services when the last session ends (an SSH logout). Keep it running with: sudo loginctl enable-linger ${user}`);
    }
    return { profile: profile.name, manager, unit, path, scope, user, pid: ready.pid, url: ready.url, linger: linger ?? null, ...(replaced ? { replaced: replaced.pid } : {}) };
  }

  /** Starts again the daemon stopped for the service, with the --port and --bind it ran with; says how that went. */
  private async restoreDaemon(paths: ProfilePaths, replaced: { pid: number; overrides: { port?: number; bind?: string } }): Promise<void> {
    const { startDaemon } = await import('../../cli/supervisor.ts');
    try {
      const again = await startDaemon(paths, { ...replaced.overrides, timeoutMs: 30_000 });
      this.note(`The service could not take over: the daemon of profile "${paths.name}" runs again as before, at ${again.url} (pid ${again.pid}).`);
    } catch (error) {
      this.warning(`The daemon stopped for the service (pid ${replaced.pid}) did not start again: ${(error as Error).message}. Start it with: gateway start --profile ${paths.name}`);
    }
  }
}
