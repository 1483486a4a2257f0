import { JOB_STATUSES, type JobStatus } from '../../shared/protocol/results.ts';
import { DomainError } from '../kernel/errors.ts';
import { JOB_LIMITS } from './job-queue.ts';

const invalid = (message: string) => new DomainError('invalid', message);

const single = (value: string | string[] | undefined, name: string): string | undefined => {
  if (Array.isArray(value)) throw invalid(`${name} may be given once.`);
  return value;
};

/** Validated filters of GET /jobs, shared with the CLI's jobs.list. */
export function jobFilter(query: Record<string, string | string[] | undefined>): { status?: JobStatus; kind?: string; limit: number; cursor?: string } {
  const unknown = Object.keys(query).filter((key) => !['status', 'kind', 'limit', 'cursor'].includes(key));
  if (unknown.length > 0) throw invalid(`Unknown query parameters: ${unknown.join(', ')}.`);
  const status = single(query.status, 'status');
  if (status !== undefined && !(JOB_STATUSES as readonly string[]).includes(status)) throw invalid(`status must be one of ${JOB_STATUSES.join(', ')}.`);
  const kind = single(query.kind, 'kind');
  if (kind !== undefined && (kind.length === 0 || kind.length > 200)) throw invalid('kind must be 1-200 characters.');
  const limitText = single(query.limit, 'limit');
  const limit = limitText === undefined ? JOB_LIMITS.defaultListLimit : Number(limitText);
  if (!Number.isInteger(limit) || limit < 1 || limit > JOB_LIMITS.maxListLimit || (limitText !== undefined && !/^\d+$/.test(limitText))) {
    throw invalid(`limit must be an integer from 1 to ${JOB_LIMITS.maxListLimit}.`);
  }
  return { status: status as JobStatus | undefined, kind, limit, cursor: single(query.cursor, 'cursor') };
}
