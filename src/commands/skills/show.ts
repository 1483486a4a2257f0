import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
import type { MethodResult } from '../../shared/protocol/results.ts';
import { visibleText } from '../../shared/visible-text.ts';

type Shown = MethodResult<'skills.show'>;

export default class SkillsShow extends BaseCommand<Shown> {
  static override summary = 'Show a skill: where it came from, its files, the agents that may use it, and its instructions.';
  static override examples = ['<%= config.bin %> skills show pdf-forms', '<%= config.bin %> skills show release-notes --draft'];
  static override args = { name: Args.string({ description: 'the skill\'s name (gateway skills list)', required: true }) };
  static override flags = { draft: Flags.boolean({ description: 'show the draft an agent wrote, waiting for approval' }), url: BaseCommand.urlFlag };

  async run(): Promise<Shown> {
    const { args, flags } = await this.parse(SkillsShow);
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const skill = await client.call('skills.show', { name: args.name, draft: flags.draft });
    // Text an agent may have written is shown with its control characters escaped: what is approved is what is read.
    this.say(`${skill.name} (${skill.status}): ${visibleText(skill.description)}`);
    this.say(`From ${visibleText(skill.source)}${skill.installedAt ? `, ${skill.installedAt}` : ''}${skill.by ? `, by ${visibleText(skill.by)}` : ''}.`);
    this.say(`Used by: ${skill.agents.length ? skill.agents.join(', ') : 'no agent (agents.<id>.skills)'}.`);
    this.say(`Files (${skill.files}, ${skill.bytes} bytes):`);
    for (const entry of skill.entries) this.say(`  ${visibleText(entry.path)}  ${entry.size}${entry.executable ? '  executable' : ''}`);
    this.say('');
    for (const line of skill.instructions.split('\n')) this.say(visibleText(line));
    return skill;
  }
}
