/** The jobs tools: jobs.enqueue (a kind some handler runs) and jobs.get. */
import type { Job } from '../../shared/protocol/results.ts';
import { DomainError } from '../kernel/errors.ts';
import type { ToolDef } from '../kernel/module.ts';
import type { JobQueue } from './job-queue.ts';

export function jobTools(queue: Pick<JobQueue, 'enqueue' | 'get'>, handles: (kind: string) => boolean, existing: (id: string) => Promise<Job>): ToolDef[] {
  return [{
    name: 'jobs.enqueue',
    description: 'Queue a job of a kind some handler runs; returns the job.',
    inputSchema: {
      type: 'object',
      additionalProperties: false,
      required: ['kind'],
      properties: {
        kind: { type: 'string', minLength: 1, maxLength: 64 },
        payload: {},
        maxAttempts: { type: 'integer', minimum: 1, maximum: 20 },
        runAt: { type: 'string', format: 'date-time' },
      },
    },
    handler: async (args) => {
      const kind = String(args.kind);
      if (!handles(kind)) throw new DomainError('invalid', `No handler runs jobs of kind ${kind}.`);
      const id = await queue.enqueue({
        kind, payload: args.payload ?? null, source: 'tools',
        ...(args.maxAttempts ? { maxAttempts: Number(args.maxAttempts) } : {}),
        ...(args.runAt ? { runAt: Date.parse(String(args.runAt)) } : {}),
      });
      return queue.get(id);
    },
  }, {
    name: 'jobs.get',
    description: 'One job: its state, attempts, error and result.',
    inputSchema: { type: 'object', additionalProperties: false, required: ['id'], properties: { id: { type: 'string', minLength: 1, maxLength: 128 } } },
    handler: (args) => existing(String(args.id)),
  }];
}
