import { BaseCommand } from '../../cli/base-command.ts';
import { table } from '../../cli/table.ts';

export interface ProfileSummary {
  name: string;
  current: boolean;
  port: number;
  state: 'running' | 'stopped' | 'stale';
  pid: number | null;
  secretStore: string | null;
  dir: string;
}

export interface ProfilesResult {
  current: string;
  profiles: ProfileSummary[];
}

export default class Profiles extends BaseCommand<ProfilesResult> {
  static override summary = 'List profiles, their ports and whether their daemons run.';
  static override examples = ['<%= config.bin %> profiles', '<%= config.bin %> profiles list --json'];

  async run(): Promise<ProfilesResult> {
    const { flags } = await this.parse(this.ctor as typeof Profiles);
    const current = this.selectProfile(flags.profile).name;
    const [{ listProfileNames, configuredPort }, { inspectDaemon }, { profilePaths }, { readEffectiveConfig }] = await Promise.all([
      import('../../shared/profiles.ts'),
      import('../../shared/daemon-lock.ts'),
      import('../../shared/profile.ts'),
      import('../../shared/config/profile-config.ts'),
    ]);
    const profiles = listProfileNames().map((name): ProfileSummary => {
      const paths = profilePaths(name);
      const found = inspectDaemon(paths);
      let secretStore: string | null = null;
      let port: number;
      try {
        secretStore = readEffectiveConfig(paths).secrets.backend ?? null;
        port = found.state === 'running' || found.state === 'starting' ? found.record.port : configuredPort(name);
      } catch {
        port = NaN;
      }
      return {
        name,
        current: name === current,
        port,
        state: found.state === 'starting' ? 'running' : found.state,
        pid: found.state === 'stopped' ? null : (found.record?.pid ?? null),
        secretStore,
        dir: paths.dir,
      };
    });
    this.say(table(['', 'PROFILE', 'PORT', 'STATE', 'PID', 'SECRETS'], profiles.map((p) => [
      p.current ? '*' : '', p.name, Number.isNaN(p.port) ? 'invalid config' : String(p.port), p.state, p.pid === null ? '-' : String(p.pid), p.secretStore ?? '-',
    ])));
    return { current, profiles };
  }
}
