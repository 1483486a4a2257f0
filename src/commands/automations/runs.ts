import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
import type { AutomationRun } from '../../shared/protocol/results.ts';

export default class AutomationsRuns extends BaseCommand<{ automation: string; runs: AutomationRun[] }> {
  static override summary = 'List an automation\'s firings, newest first: state, when, the answer and where it went.';
  static override description = 'A failed firing can be run again: gateway jobs retry <jobId>.';
  static override examples = ['<%= config.bin %> automations runs standup', '<%= config.bin %> automations runs standup --limit 5 --json'];
  static override args = { id: Args.string({ description: 'automation id', required: true }) };
  static override flags = { limit: Flags.integer({ description: 'at most this many (1-200)', default: 20, min: 1, max: 200 }), url: BaseCommand.urlFlag };

  async run(): Promise<{ automation: string; runs: AutomationRun[] }> {
    const { args, flags } = await this.parse(AutomationsRuns);
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const result = await client.call('automations.runs', { id: args.id, limit: flags.limit });
    if (!result.runs.length) this.say(`Automation ${args.id} has not fired yet.`);
    for (const run of result.runs) {
      const head = `${run.scheduledFor}  ${run.state}${run.attempts > 1 ? ` (attempt ${run.attempts})` : ''}  ${run.jobId}`;
      const tail = run.skipped ?? run.error ?? (run.text === null ? '' : `${run.text.replace(/\s+/g, ' ').slice(0, 160)}${run.deliveredTo ? `  -> ${run.deliveredTo}` : ''}`);
      this.say(tail ? `${head}\n    ${tail}` : head);
    }
    return result;
  }
}
