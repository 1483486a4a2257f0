import { Args } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
import type { StatusResult } from '../../cli/daemon-status.ts';

export interface ShowResult {
  name: string;
  current: boolean;
  dir: string;
  files: { config: string; state: string; log: string; lock: string; secrets: string | null };
  port: number;
  bind: string;
  authMode: string;
  secretStore: string | null;
  daemon: Pick<StatusResult, 'state' | 'pid' | 'url'>;
}

export default class ProfilesShow extends BaseCommand<ShowResult> {
  static override summary = 'Show a profile: its files, port, bind, auth mode, secret store and daemon.';
  static override examples = ['<%= config.bin %> profiles show staging', '<%= config.bin %> profiles show --json'];
  static override args = { name: Args.string({ description: 'profile name (default: the selected profile)' }) };

  async run(): Promise<ShowResult> {
    const { args, flags } = await this.parse(ProfilesShow);
    const profile = this.existingProfile(args.name ?? flags.profile);
    const selected = this.selectProfile(flags.profile).name;
    const [{ daemonStatus }, { loadConfig }] = await Promise.all([
      import('../../cli/daemon-status.ts'),
      import('../../shared/config/profile-config.ts'),
    ]);
    const { effective } = loadConfig(profile.paths);
    const status = await daemonStatus(profile.paths, { rpc: false });
    const { paths } = profile;
    const result: ShowResult = {
      name: profile.name,
      current: profile.name === selected,
      dir: paths.dir,
      files: { config: paths.config, state: paths.db, log: paths.log, lock: paths.lock, secrets: effective.secrets.backend === 'file' ? paths.secrets : null },
      port: status.port,
      bind: effective.gateway.bind,
      authMode: effective.gateway.auth.mode,
      secretStore: effective.secrets.backend ?? null,
      daemon: { state: status.state, pid: status.pid, url: status.url },
    };
    const rows: [string, string][] = [
      ['Profile', `${result.name}${result.current ? ' (selected)' : ''}`],
      ['Folder', result.dir],
      ['Port', String(result.port)],
      ['Bind', result.bind],
      ['Auth', result.authMode],
      ['Secrets', result.secretStore ?? '-'],
      ['Daemon', `${status.state}${status.pid ? ` (pid ${status.pid})` : ''}`],
      ['URL', status.url],
    ];
    for (const [label, value] of rows) this.say(`${`${label}:`.padEnd(9)}${value}`);
    return result;
  }
}
