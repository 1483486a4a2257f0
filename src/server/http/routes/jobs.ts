import Router from '@koa/router';
import { ROUTE_SCOPES } from '../../../shared/api/routes.ts';
import type { HttpAuthenticator } from '../../auth/http-auth.ts';
import { jobFilter, listJobs } from '../../jobs/job-filter.ts';
import type { JobQueue } from '../../jobs/job-queue.ts';
import { HttpError } from '../error-body.ts';
import { requireAuth } from '../guards.ts';

/** GET /jobs and GET /jobs/:id. */
export function jobRoutes(deps: { authenticator: HttpAuthenticator; queue: JobQueue }): Router {
  const router = new Router();
  router.get('/jobs', requireAuth(deps.authenticator, ROUTE_SCOPES['GET /jobs']), (ctx) => {
    ctx.body = listJobs(deps.queue, jobFilter(ctx.query));
  });
  router.get('/jobs/:id', requireAuth(deps.authenticator, ROUTE_SCOPES['GET /jobs/:id']), (ctx) => {
    const job = deps.queue.get(ctx.params.id!);
    if (!job) throw new HttpError(404, `No job ${ctx.params.id}.`);
    ctx.body = job;
  });
  return router;
}
