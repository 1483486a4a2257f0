import { Flags } from '@oclif/core';
import { BaseCommand } from '../cli/base-command.ts';
import { table } from '../cli/table.ts';
import type { UsageGroup, UsageSummary } from '../shared/protocol/results.ts';

export default class Usage extends BaseCommand<UsageSummary> {
  static override summary = 'Sum up model calls: tokens in and out, what they cost, errors and latency, by agent, model, credential, surface, automation, channel and person.';
  static override description = 'Token counts are those the providers reported; calls whose provider reported none are counted apart (uncounted), never as zero. Costs are in models.currency, from models.providers.<id>.prices or the bundled table of well-known models\' prices; calls of a model with no known price are counted apart (unpriced).';
  static override examples = ['<%= config.bin %> usage', '<%= config.bin %> usage --since 7d --json'];
  static override flags = {
    url: BaseCommand.urlFlag,
    since: Flags.string({ description: 'an ISO time or a duration ago (1h, 7d); default 30d' }),
  };

  async run(): Promise<UsageSummary> {
    const { flags } = await this.parse(Usage);
    const { parseSince } = await import('../cli/duration.ts');
    const since = parseSince(flags.since ?? '30d');
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const result = await client.call('usage.summary', { since });
    const money = (amount: number) => `${amount.toFixed(amount > 0 && amount < 0.01 ? 4 : 2)} ${result.currency}`;
    const rows = (label: string, groups: UsageGroup[]) => groups.map((group) => [
      label, group.key, String(group.calls), String(group.errors), String(group.inputTokens), String(group.outputTokens), String(group.uncounted), money(group.cost), String(group.unpriced), `${group.latencyMsAvg} ms`,
    ]);
    this.say(`Model calls since ${result.since}: ${result.total.calls} (${result.total.errors} failed), ${result.total.inputTokens} tokens in, ${result.total.outputTokens} out, ${money(result.total.cost)}${result.total.unpriced ? ` (and ${result.total.unpriced} calls of models with no known price)` : ''}.`);
    if (result.total.calls > 0) {
      this.say(table(['BY', 'WHAT', 'CALLS', 'FAILED', 'IN', 'OUT', 'UNCOUNTED', 'COST', 'UNPRICED', 'LATENCY'], [
        ...rows('agent', result.byAgent), ...rows('model', result.byModel), ...rows('credential', result.bySubject), ...rows('surface', result.bySurface),
        ...rows('automation', result.byAutomation), ...rows('channel', result.byChannel), ...rows('person', result.byPerson), ...rows('delegated by', result.byDelegator),
      ]));
    }
    return result;
  }
}
