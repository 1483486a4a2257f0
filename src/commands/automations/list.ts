import { BaseCommand } from '../../cli/base-command.ts';
import { table } from '../../cli/table.ts';
import type { AutomationView } from '../../shared/protocol/results.ts';

export default class AutomationsList extends BaseCommand<{ automations: AutomationView[] }> {
  static override summary = 'List automations: trigger, next firing and the last run.';
  static override examples = ['<%= config.bin %> automations list', '<%= config.bin %> automations list --json'];
  static override flags = { url: BaseCommand.urlFlag };

  async run(): Promise<{ automations: AutomationView[] }> {
    const { flags } = await this.parse(AutomationsList);
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    // Every page: a long list comes in pages of 500.
    const result = { automations: [] as AutomationView[] };
    for (let cursor: string | undefined; ;) {
      const page = await client.call('automations.list', { limit: 500, ...(cursor ? { cursor } : {}) });
      result.automations.push(...page.automations);
      if (!page.nextCursor) break;
      cursor = page.nextCursor;
    }
    this.say(result.automations.length ? table(['AUTOMATION', 'ENABLED', 'TRIGGER', 'ACTION', 'NEXT', 'LAST'], result.automations.map((automation) => [
      automation.id, automation.enabled ? 'yes' : 'no', automation.when,
      typeof automation.action.agent === 'string' ? `agent ${automation.action.agent}` : 'message',
      automation.nextAt ?? '-', automation.last ? `${automation.last.state} ${automation.last.scheduledFor}` : '-',
    ])) : 'No automations. Add one: gateway automations add <id> --every 1h --agent <agent> --prompt "..."');
    return result;
  }
}
