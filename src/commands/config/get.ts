import { Args } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';

export interface GetResult {
  profile: string;
  key: string;
  value: unknown;
  source: 'config' | 'default';
}

export default class ConfigGet extends BaseCommand<GetResult> {
  static override summary = 'Print the value of one setting (its default when unset).';
  static override examples = ['<%= config.bin %> config get gateway.port', '<%= config.bin %> config get gateway.auth --json'];
  static override args = { key: Args.string({ description: 'dotted key, such as gateway.bind', required: true }) };
  static override flags = { url: BaseCommand.urlFlag };

  async run(): Promise<GetResult> {
    const { args, flags } = await this.parse(ConfigGet);
    if (flags.url) {
      const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
      const remote = await client.call('config.get', { key: args.key });
      const value = 'value' in remote ? remote.value : undefined;
      this.say(typeof value === 'string' ? value : JSON.stringify(value ?? null, null, 2));
      return { profile: flags.url, key: args.key, value: value ?? null, source: 'source' in remote ? remote.source : 'default' };
    }
    const profile = this.existingProfile(flags.profile);
    const [{ assertKnownKey, getPath }, { loadConfig }, { derivedPort }] = await Promise.all([
      import('../../shared/config/keys.ts'),
      import('../../shared/config/profile-config.ts'),
      import('../../shared/profile.ts'),
    ]);
    assertKnownKey(args.key);
    const { raw, effective } = loadConfig(profile.paths);
    let value = getPath(effective, args.key);
    if (args.key === 'gateway.port' && value === undefined) value = derivedPort(profile.name);
    const source = getPath(raw, args.key) === undefined ? 'default' : 'config';
    this.say(value === undefined ? '' : typeof value === 'string' ? value : JSON.stringify(value, null, 2));
    return { profile: profile.name, key: args.key, value: value ?? null, source };
  }
}
