import { Args } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
import type { AppliedChange } from '../../cli/config-access.ts';

export default class ConfigSet extends BaseCommand<AppliedChange> {
  static override summary = 'Change one setting; the value is parsed as JSON where it parses, else taken as text.';
  static override description = 'Creates the profile if it does not exist. While the daemon runs, the change goes through it and the output says whether a restart is needed. Secrets are not settings: use `gateway secrets set`.';
  static override examples = [
    '<%= config.bin %> config set gateway.bind custom',
    '<%= config.bin %> config set gateway.customBindHost 127.0.0.1',
    '<%= config.bin %> config set gateway.port 18800 --profile staging',
    '<%= config.bin %> config set gateway.trustedProxies \'["10.0.0.0/8"]\'',
  ];
  static override flags = { url: BaseCommand.urlFlag };
  static override args = {
    key: Args.string({ description: 'dotted key, such as gateway.bind', required: true }),
    value: Args.string({ description: 'new value (JSON where it parses: numbers, booleans, arrays, objects)', required: true }),
  };

  async run(): Promise<AppliedChange> {
    const { args, flags } = await this.parse(ConfigSet);
    const profile = this.selectProfile(flags.profile);
    const [{ assertWritableKey, assertValidValue, parseValue }, { ensureProfile }, { applyConfigChange, describeChange }] = await Promise.all([
      import('../../shared/config/keys.ts'),
      import('../../shared/profile-setup.ts'),
      import('../../cli/config-access.ts'),
    ]);
    const value = parseValue(args.value);
    assertWritableKey(args.key);
    assertValidValue(args.key, value);
    if (flags.url) {
      const client = await this.rpc(profile, flags.url);
      const change: AppliedChange = { ...(await client.call('config.set', { key: args.key, value })), profile: flags.url, via: 'daemon' };
      this.say(describeChange(change));
      return change;
    }
    const setup = await ensureProfile(profile.paths);
    if (setup.warning) this.warning(setup.warning);
    const change = await applyConfigChange(profile.paths, args.key, value);
    this.say(describeChange(change));
    return change;
  }
}
