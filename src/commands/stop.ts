import { Flags } from '@oclif/core';
import { BaseCommand } from '../cli/base-command.ts';
import type { StopOutcome } from '../cli/supervisor.ts';

export default class Stop extends BaseCommand<StopOutcome> {
  static override summary = 'Stop the profile\'s daemon and wait until it has exited and its port is free.';
  static override description = 'Asks the daemon over RPC, falls back to SIGTERM, and uses SIGKILL only with --force. Stopping a stopped profile succeeds.';
  static override examples = ['<%= config.bin %> stop', '<%= config.bin %> stop --profile staging --force'];
  static override flags = {
    force: Flags.boolean({ description: 'kill the daemon with SIGKILL if it does not stop in time' }),
    timeout: Flags.integer({ description: 'milliseconds to wait for the daemon to exit', default: 15_000, min: 100 }),
    url: BaseCommand.urlFlag,
  };

  async run(): Promise<StopOutcome> {
    const { flags } = await this.parse(Stop);
    if (flags.url) {
      const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
      const { stopRemote } = await import('../cli/supervisor.ts');
      const outcome = await stopRemote(client, flags.url, flags.timeout);
      this.say(`Stopped the gateway at ${flags.url} (pid ${outcome.pid}).`);
      return outcome;
    }
    const profile = this.existingProfile(flags.profile);
    const { serviceOf } = await import('../cli/service.ts');
    const record = serviceOf(profile.paths);
    if (record) {
      // Stopped through its manager, which would otherwise count the exit against the unit.
      const { stopService } = await import('../cli/service-control.ts');
      const stopped = await stopService(profile.paths, record, flags.timeout);
      this.say(stopped.state === 'stopped' ? `Stopped ${record.unit} (pid ${stopped.pid}).` : `${record.unit} is not running.`);
      return { profile: profile.name, state: stopped.state, pid: stopped.pid, method: 'service' };
    }
    const { stopDaemon } = await import('../cli/supervisor.ts');
    const outcome = await stopDaemon(profile.paths, { force: flags.force, timeoutMs: flags.timeout });
    if (outcome.state === 'not-running') {
      this.say(outcome.method === 'cleared'
        ? `The daemon of profile "${profile.name}" was not running; removed its stale lock (pid ${outcome.pid}).`
        : `The daemon of profile "${profile.name}" is not running.`);
    } else {
      this.say(`Stopped the daemon of profile "${profile.name}" (pid ${outcome.pid}, ${outcome.method}).`);
    }
    return outcome;
  }
}
