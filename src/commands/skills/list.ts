import { BaseCommand } from '../../cli/base-command.ts';
import { table } from '../../cli/table.ts';
import type { MethodResult } from '../../shared/protocol/results.ts';
import { visibleText } from '../../shared/visible-text.ts';

type Listed = MethodResult<'skills.list'>;

export default class SkillsList extends BaseCommand<Listed> {
  static override summary = 'List the skills installed, and those agents wrote that wait for approval.';
  static override examples = ['<%= config.bin %> skills list', '<%= config.bin %> skills list --json'];
  static override flags = { url: BaseCommand.urlFlag };

  async run(): Promise<Listed> {
    const { flags } = await this.parse(SkillsList);
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const result = await client.call('skills.list');
    const rows = [...result.skills, ...result.drafts].map((skill) => [skill.name, skill.status, String(skill.files), visibleText(skill.description.length > 70 ? `${skill.description.slice(0, 69)}…` : skill.description)]);
    this.say(rows.length ? table(['NAME', 'STATUS', 'FILES', 'DESCRIPTION'], rows) : 'No skill is installed: gateway skills add <folder|archive|git address>');
    if (result.drafts.length) this.say(`\n${result.drafts.length} written by agents wait for approval: gateway skills show <name> --draft, then gateway skills approve <name> (or remove <name> --draft).`);
    return result;
  }
}
