import { Flags } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
import { table } from '../../cli/table.ts';
import { JOB_STATUSES, type JobList } from '../../shared/protocol/results.ts';

export type { JobList };

export default class JobsList extends BaseCommand<JobList> {
  static override summary = 'List jobs, newest first.';
  static override examples = ['<%= config.bin %> jobs list --status failed', '<%= config.bin %> jobs list --kind github.push --limit 20 --json'];
  static override flags = {
    status: Flags.option({ description: 'only jobs in this state', options: JOB_STATUSES })(),
    kind: Flags.string({ description: 'only jobs of this kind' }),
    limit: Flags.integer({ description: 'at most this many (1-200)', default: 50, min: 1, max: 200 }),
    cursor: Flags.string({ description: 'the nextCursor of a previous page' }),
    url: BaseCommand.urlFlag,
  };

  async run(): Promise<JobList> {
    const { flags } = await this.parse(JobsList);
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const result = await client.call('jobs.list', { status: flags.status, kind: flags.kind, limit: flags.limit, cursor: flags.cursor });
    this.say(result.jobs.length ? table(['JOB', 'KIND', 'STATUS', 'ATTEMPTS', 'CREATED', 'SOURCE'], result.jobs.map((job) => [
      job.id, job.kind, job.status, `${job.attempts}/${job.maxAttempts}`, job.createdAt, job.source ?? '-',
    ])) : 'No jobs.');
    if (result.nextCursor) this.say(`More: gateway jobs list --cursor ${result.nextCursor}`);
    return result;
  }
}
