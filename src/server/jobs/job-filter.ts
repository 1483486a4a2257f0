import { HttpError } from '../http/error-body.ts';
import { CursorError, JOB_LIMITS, JOB_STATUSES, type JobQueue, type JobStatus } from './job-queue.ts';

const single = (value: string | string[] | undefined, name: string): string | undefined => {
  if (Array.isArray(value)) throw new HttpError(400, `${name} may be given once.`);
  return value;
};

/** Validated filters of GET /jobs, shared with the CLI's jobs.list. */
export function jobFilter(query: Record<string, string | string[] | undefined>): { status?: JobStatus; kind?: string; limit: number; cursor?: string } {
  const unknown = Object.keys(query).filter((key) => !['status', 'kind', 'limit', 'cursor'].includes(key));
  if (unknown.length > 0) throw new HttpError(400, `Unknown query parameters: ${unknown.join(', ')}.`);
  const status = single(query.status, 'status');
  if (status !== undefined && !(JOB_STATUSES as readonly string[]).includes(status)) throw new HttpError(400, `status must be one of ${JOB_STATUSES.join(', ')}.`);
  const kind = single(query.kind, 'kind');
  if (kind !== undefined && (kind.length === 0 || kind.length > 200)) throw new HttpError(400, 'kind must be 1-200 characters.');
  const limitText = single(query.limit, 'limit');
  const limit = limitText === undefined ? JOB_LIMITS.defaultListLimit : Number(limitText);
  if (!Number.isInteger(limit) || limit < 1 || limit > JOB_LIMITS.maxListLimit || (limitText !== undefined && !/^\d+$/.test(limitText))) {
    throw new HttpError(400, `limit must be an integer from 1 to ${JOB_LIMITS.maxListLimit}.`);
  }
  return { status: status as JobStatus | undefined, kind, limit, cursor: single(query.cursor, 'cursor') };
}

export function listJobs(queue: JobQueue, filter: ReturnType<typeof jobFilter>) {
  try {
    return queue.list(filter);
  } catch (error) {
    if (error instanceof CursorError) throw new HttpError(400, error.message);
    throw error;
  }
}
