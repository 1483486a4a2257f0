import { Args } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
import type { Job } from '../../shared/protocol/results.ts';

export default class JobsRetry extends BaseCommand<Job> {
  static override summary = 'Queue a failed job again, with a fresh set of attempts.';
  static override examples = ['<%= config.bin %> jobs retry job_x2Jd0s9'];
  static override args = { id: Args.string({ description: 'job id', required: true }) };
  static override flags = { url: BaseCommand.urlFlag };

  async run(): Promise<Job> {
    const { args, flags } = await this.parse(JobsRetry);
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const job = await client.call('jobs.retry', { id: args.id });
    this.say(`Queued ${args.id} again.`);
    return job;
  }
}
