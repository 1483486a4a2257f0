import { HttpError } from '../http/error-body.ts';
import { jobFilter, listJobs } from './job-filter.ts';
import type { MethodTable } from '../ws/method-table.ts';
import { invalidParams, RpcError } from '../ws/rpc-error.ts';
import type { JobQueue } from './job-queue.ts';

const idOf = (params: unknown): string => {
  const id = (params as { id?: unknown } | undefined)?.id;
  if (typeof id !== 'string' || id.length === 0) throw invalidParams('params.id must be a job id');
  return id;
};

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
      const job = queue.get(idOf(params));
      if (!job) throw new RpcError('NOT_FOUND', `no job ${idOf(params)}`);
      return job;
    })
    .add('jobs.retry', (params) => {
      const outcome = queue.retry(idOf(params));
      if (outcome === undefined) throw new RpcError('NOT_FOUND', `no job ${idOf(params)}`);
      if (outcome === 'not-failed') throw new RpcError('INVALID_REQUEST', 'only a failed job can be retried', { exitCode: 1 });
      return outcome;
    });
}
