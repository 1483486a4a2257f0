import { Args } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';

export default class AutomationsRun extends BaseCommand<{ automation: string; key: string; jobId: string }> {
  static override summary = 'Fire an automation now, once, beside its schedule.';
  static override description = 'The firing is queued as a job; follow it with gateway automations runs <id>.';
  static override examples = ['<%= config.bin %> automations run standup'];
  static override args = { id: Args.string({ description: 'automation id', required: true }) };
  static override flags = { url: BaseCommand.urlFlag };

  async run(): Promise<{ automation: string; key: string; jobId: string }> {
    const { args, flags } = await this.parse(AutomationsRun);
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const result = await client.call('automations.run', { id: args.id });
    this.say(`Fired automation ${args.id} (job ${result.jobId}); see gateway automations runs ${args.id}`);
    return result;
  }
}
