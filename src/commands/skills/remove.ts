import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
import type { MethodResult } from '../../shared/protocol/results.ts';

type Removed = MethodResult<'skills.remove'>;

export default class SkillsRemove extends BaseCommand<Removed> {
  static override summary = 'Remove an installed skill, or reject (--draft) one an agent wrote.';
  static override examples = ['<%= config.bin %> skills remove pdf-forms', '<%= config.bin %> skills remove release-notes --draft'];
  static override args = { name: Args.string({ description: 'the skill\'s name (gateway skills list)', required: true }) };
  static override flags = { draft: Flags.boolean({ description: 'reject the draft of this name that waits for approval' }), url: BaseCommand.urlFlag };

  async run(): Promise<Removed> {
    const { args, flags } = await this.parse(SkillsRemove);
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const removed = await client.call('skills.remove', { name: args.name, draft: flags.draft });
    this.say(flags.draft ? `Rejected the draft skill ${removed.name}.` : `Removed skill ${removed.name}.`);
    return removed;
  }
}
