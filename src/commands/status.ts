import { BaseCommand } from '../cli/base-command.ts';
import type { StatusResult } from '../cli/daemon-status.ts';

export default class Status extends BaseCommand<StatusResult> {
  static override summary = 'Show whether the profile\'s daemon is running, and where.';
  static override description = 'Exit code: 0 running (even if the RPC check fails, see rpc.ok, or config.json has become invalid, see configError), 3 stopped, 4 stale (the daemon died; `gateway start` reclaims it), 78 stopped with a config.json it cannot start with.';
  static override examples = [
    '<%= config.bin %> status',
    '<%= config.bin %> status --profile staging --json',
    '<%= config.bin %> status --url ws://127.0.0.1:28789   # through an SSH tunnel',
  ];
  static override flags = { url: BaseCommand.urlFlag };

  async run(): Promise<StatusResult> {
    const { flags } = await this.parse(Status);
    const { remoteStatus } = await import('../cli/daemon-status.ts');
    const { localStatus, reportStatus } = await import('../cli/status-report.ts');
    const status = flags.url
      ? await remoteStatus(flags.url, () => this.rpc(this.selectProfile(flags.profile), flags.url))
      : await localStatus(this.existingProfile(flags.profile).paths);
    return reportStatus(status, { say: (text) => this.say(text), note: (text) => this.note(text), warning: (text) => this.warning(text), exitWith: (code) => this.exitWith(code) });
  }
}
