import { Args } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
import type { AppliedChange } from '../../cli/config-access.ts';

export default class ConfigUnset extends BaseCommand<AppliedChange> {
  static override summary = 'Remove one setting so its default applies again.';
  static override examples = ['<%= config.bin %> config unset gateway.port'];
  static override flags = { url: BaseCommand.urlFlag };
  static override args = { key: Args.string({ description: 'dotted key', required: true }) };

  async run(): Promise<AppliedChange> {
    const { args, flags } = await this.parse(ConfigUnset);
    // The key is checked where the file is read: a key the schema does not know can be removed when the file holds it.
    const { applyConfigChange, describeChange } = await import('../../cli/config-access.ts');
    if (flags.url) {
      const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
      const change: AppliedChange = { ...(await client.call('config.unset', { key: args.key })), profile: flags.url, via: 'daemon' };
      this.say(describeChange(change, true));
      return change;
    }
    const profile = this.existingProfile(flags.profile);
    const change = await applyConfigChange(profile.paths, args.key, undefined);
    this.say(describeChange(change, true));
    return change;
  }
}
