import { Flags } from '@oclif/core';
import { BaseCommand } from '../cli/base-command.ts';
import type { StartOutcome } from '../cli/supervisor.ts';

export default class Restart extends BaseCommand<StartOutcome> {
  static override summary = 'Stop the profile\'s daemon if it runs, then start it again.';
  static override description = 'Reuses the --port and --bind the daemon was started with; settings from config are read afresh.';
  static override examples = ['<%= config.bin %> restart --profile staging'];
  static override flags = {
    verbose: Flags.boolean({ description: 'log at debug level' }),
    timeout: Flags.integer({ description: 'milliseconds to wait for each of stop and start', default: 30_000, min: 100 }),
    force: Flags.boolean({ description: 'kill the old daemon with SIGKILL if it does not stop in time' }),
  };

  async run(): Promise<StartOutcome> {
    const { flags } = await this.parse(Restart);
    const profile = this.existingProfile(flags.profile);
    const [{ stopDaemon, startDaemon }, { inspectDaemon }, { loadConfig }, { resolveListen }, { assertExposure }] = await Promise.all([
      import('../cli/supervisor.ts'),
      import('../shared/daemon-lock.ts'),
      import('../shared/config/profile-config.ts'),
      import('../shared/listen.ts'),
      import('../shared/config/exposure.ts'),
    ]);
    const found = inspectDaemon(profile.paths);
    const overrides = found.state === 'stopped' ? {} : (found.record?.overrides ?? {});
    // Check the new configuration before stopping a daemon that works.
    const { effective } = loadConfig(profile.paths);
    assertExposure(effective, resolveListen(profile.name, effective, overrides).bind);

    const { serviceOf } = await import('../cli/service.ts');
    const record = serviceOf(profile.paths);
    if (record) {
      const { startService, stopService } = await import('../cli/service-control.ts');
      await stopService(profile.paths, record, flags.timeout);
      const started = await startService(profile.paths, record, flags.timeout);
      this.say(`Restarted ${record.unit}: the daemon of profile "${profile.name}" is running at ${started.url} (pid ${started.pid}).`);
      return { profile: profile.name, ...started, logFile: '', service: record.unit };
    }
    const stopped = await stopDaemon(profile.paths, { force: flags.force, timeoutMs: flags.timeout });
    if (stopped.state === 'stopped') this.note(`Stopped the daemon of profile "${profile.name}" (pid ${stopped.pid}).`);
    const outcome = await startDaemon(profile.paths, { ...overrides, verbose: flags.verbose, timeoutMs: flags.timeout });
    this.say(`The daemon of profile "${profile.name}" is running at ${outcome.url} (pid ${outcome.pid}).`);
    return outcome;
  }
}
