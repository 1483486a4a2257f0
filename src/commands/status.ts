import { BaseCommand } from '../cli/base-command.ts';
import type { StatusResult } from '../cli/daemon-status.ts';
import { ExitCode } from '../shared/exit-codes.ts';

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
    const { daemonStatus, remoteStatus, formatDuration } = await import('../cli/daemon-status.ts');
    let status: StatusResult;
    if (flags.url) {
      status = await remoteStatus(flags.url, () => this.rpc(this.selectProfile(flags.profile), flags.url));
    } else {
      const { paths } = this.existingProfile(flags.profile);
      status = await daemonStatus(paths);
      const { serviceOf, unitState } = await import('../cli/service.ts');
      const record = serviceOf(paths);
      if (record) status.service = { unit: record.unit, scope: record.scope, active: unitState(record).active };
    }
    // Stopped with a config it cannot start with: the config's exit code, which says more than "stopped".
    if (status.state === 'stopped') this.exitWith(status.configError ? ExitCode.invalidConfig : ExitCode.notRunning);
    if (status.state === 'stale') this.exitWith(ExitCode.stale);

    const state = status.state === 'running'
      ? `running (pid ${status.pid}${status.uptimeMs === null ? '' : `, up ${formatDuration(status.uptimeMs)}`}${status.ready === false ? ', starting' : ''})`
      : status.state === 'stale' ? `stale (${status.reason}); gateway start --profile ${status.profile} reclaims it` : 'stopped';
    const rows: [string, string][] = [
      ['Profile', status.profile],
      ['State', state],
      ['URL', status.url],
      ['Bind', status.bind],
      ['Version', status.version ?? '-'],
      ['Secrets', status.secretStore ?? '-'],
      ['Log', status.logFile || (status.state === 'running' ? 'stdout only (the supervisor\'s journal keeps it)' : '')],
    ];
    if (status.overlay) rows.push(['Overlay', `${status.overlay.url} (tailscale ${status.overlay.mode})`]);
    if (status.service) rows.push(['Service', `${status.service.unit} (${status.service.scope}, ${status.service.active})`]);
    if (status.state === 'running') rows.push(['RPC', status.rpc.ok ? 'ok' : `failed: ${status.rpc.error}`]);
    if (status.configError) rows.push(['Config', `INVALID: ${status.configError}`]);
    for (const [name, reason] of Object.entries(status.problems ?? {})) rows.push(['Problem', `${name}: ${reason}`]);
    if (status.plugins && (status.plugins.loaded.length > 0 || status.plugins.errors.length > 0)) {
      rows.push(['Plugins', [status.plugins.loaded.join(', '), ...status.plugins.errors.map((e) => `${e.plugin} FAILED: ${e.error}`)].filter(Boolean).join('; ')]);
    }
    for (const [label, value] of rows) this.say(`${`${label}:`.padEnd(9)}${value}`);
    for (const failure of status.plugins?.errors ?? []) this.warning(`plugin ${failure.plugin} failed to load: ${failure.error}`);
    if (status.configError) this.warning(`${status.configError} ${status.state === 'running' ? 'The running daemon keeps the settings it loaded; a restart would fail until the file is fixed.' : '`gateway start` will fail until the file is fixed.'}`);
    return status;
  }
}
