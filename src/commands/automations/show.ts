import { Args } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
import type { AutomationView } from '../../shared/protocol/results.ts';

export default class AutomationsShow extends BaseCommand<AutomationView> {
  static override summary = 'Show one automation: its trigger, action, next firing and last run.';
  static override examples = ['<%= config.bin %> automations show standup --json'];
  static override args = { id: Args.string({ description: 'automation id', required: true }) };
  static override flags = { url: BaseCommand.urlFlag };

  async run(): Promise<AutomationView> {
    const { args, flags } = await this.parse(AutomationsShow);
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const automation = await client.call('automations.get', { id: args.id });
    const rows: [string, unknown][] = [
      ['id', automation.id], ['enabled', automation.enabled], ['trigger', automation.when], ['action', automation.action], ['catchUp', automation.catchUp],
      ['next', automation.nextAt ?? '-'], ['last', automation.last ? `${automation.last.state} (scheduled ${automation.last.scheduledFor})${automation.last.error ? `: ${automation.last.error}` : ''}` : '-'],
    ];
    if (automation.description) rows.splice(1, 0, ['description', automation.description]);
    for (const [key, value] of rows) this.say(`${`${key}:`.padEnd(13)}${typeof value === 'string' ? value : JSON.stringify(value)}`);
    return automation;
  }
}
