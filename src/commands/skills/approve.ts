import { Args } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
import type { SkillView } from '../../shared/protocol/results.ts';

export default class SkillsApprove extends BaseCommand<SkillView> {
  static override summary = 'Approve a skill an agent wrote: it is installed, in place of any of its name.';
  static override examples = ['<%= config.bin %> skills show release-notes --draft', '<%= config.bin %> skills approve release-notes'];
  static override args = { name: Args.string({ description: 'the draft\'s name (gateway skills list)', required: true }) };
  static override flags = { url: BaseCommand.urlFlag };

  async run(): Promise<SkillView> {
    const { args, flags } = await this.parse(SkillsApprove);
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const approved = await client.call('skills.approve', { name: args.name });
    this.say(`Approved skill ${approved.name}: installed (${approved.files} files).`);
    return approved;
  }
}
