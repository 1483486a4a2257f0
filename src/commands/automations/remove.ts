import { Args } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
import { GatewayError } from '../../shared/errors.ts';

export default class AutomationsRemove extends BaseCommand<{ profile: string; id: string }> {
  static override summary = 'Remove an automation: it stops firing at once; its past runs stay until retention prunes them.';
  static override examples = ['<%= config.bin %> automations remove standup'];
  static override args = { id: Args.string({ description: 'automation id', required: true }) };

  async run(): Promise<{ profile: string; id: string }> {
    const { args, flags } = await this.parse(AutomationsRemove);
    const profile = this.existingProfile(flags.profile);
    const [{ loadConfig }, { applyConfigChange }] = await Promise.all([import('../../shared/config/profile-config.ts'), import('../../cli/config-access.ts')]);
    if (!loadConfig(profile.paths).effective.automations[args.id]) {
      throw new GatewayError(`No automation ${JSON.stringify(args.id)} in profile "${profile.name}".`, { kind: 'not_found', hints: ['gateway automations list'] });
    }
    await applyConfigChange(profile.paths, `automations.${args.id}`, undefined);
    this.say(`Removed automation ${args.id}.`);
    return { profile: profile.name, id: args.id };
  }
}
