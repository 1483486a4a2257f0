/** GET /jobs and GET /jobs/:id, with their API description. */
import { ROUTE_SCOPES } from '../../shared/api/routes.ts';
import type { Job } from '../../shared/protocol/results.ts';
import { errorResponse, jsonResponse, protectedErrors, security } from '../kernel/api-doc.ts';
import type { ModuleContext } from '../kernel/module.ts';
import { jobFilter } from './job-filter.ts';
import type { JobQueue } from './job-queue.ts';

export function jobRoutes(http: ModuleContext['http'], queue: Pick<JobQueue, 'list'>, existing: (id: string) => Promise<Job>): void {
  http.reserve('/jobs');
  http.document({
    paths: {
      '/jobs': {
        get: {
          summary: 'list jobs, newest first', ...security('GET /jobs'),
          parameters: [
            { name: 'status', in: 'query', schema: { type: 'string', enum: ['queued', 'running', 'succeeded', 'failed'] } },
            { name: 'kind', in: 'query', schema: { type: 'string' } },
            { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 200, default: 50 } },
            { name: 'cursor', in: 'query', schema: { type: 'string' } },
          ],
          responses: { 200: jsonResponse('JobList', 'a page of jobs'), ...protectedErrors },
        },
      },
      '/jobs/{id}': {
        get: {
          summary: 'one job', ...security('GET /jobs/:id'),
          parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }],
          responses: { 200: jsonResponse('Job', 'the job'), ...protectedErrors, 404: errorResponse('no such job') },
        },
      },
    },
  });
  http.route({
    method: 'GET', path: '/jobs', auth: { scope: ROUTE_SCOPES['GET /jobs'] },
    handler: async (route) => { route.body = await queue.list(jobFilter(route.query)); },
  });
  http.route({
    method: 'GET', path: '/jobs/:id', auth: { scope: ROUTE_SCOPES['GET /jobs/:id'] },
    handler: async (route) => { route.body = await existing(route.params.id); },
  });
}
