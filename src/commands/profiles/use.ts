import { Args } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';

export default class ProfilesUse extends BaseCommand<{ current: string }> {
  static override summary = 'Select the profile that commands act on when neither --profile nor GATEWAY_PROFILE is given.';
  static override examples = ['<%= config.bin %> profiles use staging'];
  static override args = { name: Args.string({ description: 'profile name', required: true }) };

  async run(): Promise<{ current: string }> {
    const { args } = await this.parse(ProfilesUse);
    const [{ assertProfileName, currentProfileFile, gatewayHome }, { requireProfile }, { mkdirSync, writeFileSync }] = await Promise.all([
      import('../../shared/profile.ts'),
      import('../../shared/profiles.ts'),
      import('node:fs'),
    ]);
    const name = assertProfileName(args.name);
    requireProfile(name);
    mkdirSync(gatewayHome(), { recursive: true, mode: 0o700 });
    writeFileSync(currentProfileFile(), `${name}\n`, { mode: 0o600 });
    if (process.env.GATEWAY_PROFILE && process.env.GATEWAY_PROFILE !== name) {
      this.warning(`GATEWAY_PROFILE=${process.env.GATEWAY_PROFILE} is set in this shell and takes precedence.`);
    }
    this.say(`Commands now act on profile "${name}".`);
    return { current: name };
  }
}
