import { Args } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
import type { Job } from '../../shared/protocol/results.ts';

export default class JobsShow extends BaseCommand<Job> {
  static override summary = 'Show one job: its state, attempts, error and result.';
  static override examples = ['<%= config.bin %> jobs show job_x2Jd0s9 --json'];
  static override args = { id: Args.string({ description: 'job id', required: true }) };
  static override flags = { url: BaseCommand.urlFlag };

  async run(): Promise<Job> {
    const { args, flags } = await this.parse(JobsShow);
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const job = await client.call('jobs.get', { id: args.id });
    for (const [key, value] of Object.entries(job)) this.say(`${`${key}:`.padEnd(13)}${typeof value === 'string' ? value : JSON.stringify(value)}`);
    return job;
  }
}
