import Router from '@koa/router';
import { openApiDocument } from '../openapi.ts';

/** GET /openapi.json: the API contract, public. */
export function apiContractRoutes(): Router {
  const router = new Router();
  const document = JSON.stringify(openApiDocument());
  router.get('/openapi.json', (ctx) => {
    ctx.type = 'application/json';
    ctx.body = document;
  });
  return router;
}
