import { HttpError } from '../http/error-body.ts';
import { jobFilter, listJobs } from './job-filter.ts';
import type { MethodTable } from '../ws/method-table.ts';
import { idParam, invalidParams, RpcError } from '../ws/rpc-error.ts';
import type { JobQueue } from './job-queue.ts';

/** jobs.list / jobs.get / jobs.retry for the CLI, with the same filters as GET /jobs. */
export function registerJobMethods(methods: MethodTable, queue: JobQueue): void {
  methods
    .add('jobs.list', (params) => {
      const input = (params ?? {}) as Record<string, unknown>;
      const query = Object.fromEntries(Object.entries(input).filter(([, value]) => value !== undefined).map(([key, value]) => [key, String(value)]));
      try {
        return listJobs(queue, jobFilter(query));
      } catch (error) {
        if (error instanceof HttpError) throw invalidParams(error.message);
        throw error;
      }
    })
    .add('jobs.get', (params) => {
      const job = queue.get(idParam(params, 'id'));
      if (!job) throw new RpcError('NOT_FOUND', `no job ${idParam(params, 'id')}`);
      return job;
    })
    .add('jobs.retry', (params) => {
      const outcome = queue.retry(idParam(params, 'id'));
      if (outcome === undefined) throw new RpcError('NOT_FOUND', `no job ${idParam(params, 'id')}`);
      if (outcome === 'not-failed') throw new RpcError('INVALID_REQUEST', 'only a failed job can be retried', { exitCode: 1 });
      return outcome;
    });
}
