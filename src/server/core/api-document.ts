/**
 * The API contract at GET /openapi.json: what every module documented,
 * completed with the answers any operation can give, with the schemas that
 * validate requests; and the probes' own description.
 */
import { ERROR_CATEGORIES, schemas } from '../../shared/api/schemas.ts';
import type { ApiDocumentPart } from '../kernel/api-doc.ts';
import { errorResponse, jsonResponse } from '../kernel/api-doc.ts';
import type { ModuleContext } from '../kernel/module.ts';

const HTTP_METHODS = new Set(['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace']);

/**
 * The answers any operation can give whatever it documents itself, each in the
 * error body the operation uses (its own 400's, else the API's): 405 for
 * another method on its path (with Allow), 415 for a body that is not JSON
 * where it takes JSON, 503 while the gateway cannot store (a full disk) or is stopping.
 */
export function withCommonAnswers(item: Record<string, unknown>): Record<string, unknown> {
  const completed: Record<string, unknown> = {};
  for (const [method, operation] of Object.entries(item)) {
    if (!HTTP_METHODS.has(method) || !operation || typeof operation !== 'object') {
      completed[method] = operation;
      continue;
    }
    const { responses = {}, requestBody } = operation as { responses?: Record<string, { content?: Record<string, { schema?: unknown }> }>; requestBody?: { content?: Record<string, unknown> } };
    const own = Object.entries(responses).find(([status]) => status.startsWith('4'))?.[1]?.content?.['application/json']?.schema ?? { $ref: '#/components/schemas/Error' };
    const answer = (description: string) => ({ description, content: { 'application/json': { schema: own } } });
    completed[method] = {
      ...operation,
      responses: {
        400: answer('a credential in the query string, which is never accepted'),
        ...(requestBody?.content?.['application/json'] ? { 415: answer('the body is not sent as application/json') } : {}),
        405: answer('another method on this path; Allow names the methods it serves'),
        503: answer('the gateway cannot store now (its disk is full) or is stopping; see Retry-After'),
        ...responses,
      },
    };
  }
  return completed;
}

/** The OpenAPI 3.1 document of the HTTP API: the modules' parts, paths in order. */
export function apiDocument(parts: ApiDocumentPart, version: string): Record<string, unknown> {
  const paths = Object.fromEntries(Object.entries(parts.paths).sort(([a], [b]) => a.localeCompare(b)).map(([path, item]) => [path, withCommonAnswers(item)]));
  return {
    openapi: '3.1.0',
    info: {
      title: 'gateway HTTP API',
      version,
      description: `Errors answer {error, message, statusCode} with error one of ${ERROR_CATEGORIES.join(', ')}.`,
    },
    components: {
      schemas: { ...schemas, ...parts.schemas },
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'the gateway credential, a product access token (gwt_...), a JWT of the configured issuer or the service key; never in a query string' },
        hubSignature: { type: 'apiKey', in: 'header', name: 'X-Hub-Signature-256', description: 'sha256=<hex HMAC-SHA256 of the raw body>' },
        hooksToken: { type: 'http', scheme: 'bearer', description: 'the hooks token (gateway hooks token set), also accepted as x-gateway-token; never the gateway credential' },
      },
    },
    paths,
  };
}

/** Serves the document (made at its first request, once every module has documented its routes) and documents the probes. */
export function apiDocumentRoutes(ctx: Pick<ModuleContext, 'http' | 'daemon'>): void {
  let document: string | undefined;
  ctx.http.route({
    method: 'GET', path: '/openapi.json', auth: 'public',
    handler: (http) => {
      document ??= JSON.stringify(apiDocument(ctx.daemon.apiDocument(), ctx.daemon.version));
      http.type = 'application/json';
      http.body = document;
    },
  });
  ctx.http.document({
    paths: {
      '/healthz': { get: { summary: 'liveness', responses: { 200: jsonResponse('Probe', 'live'), 429: errorResponse('too many requests from the address; see Retry-After') } } },
      '/readyz': {
        get: {
          summary: 'readiness; with a valid credential, the checks and their problems too',
          responses: {
            200: jsonResponse('Probe', 'ready'), 503: jsonResponse('Probe', 'starting, stopping or unable to serve'),
            401: errorResponse('a credential that is not valid (none is needed on loopback), or none beyond loopback on an exposed gateway'),
            429: errorResponse('too many requests from the address; see Retry-After'),
          },
        },
      },
      '/openapi.json': { get: { summary: 'this document', responses: { 200: { description: 'OpenAPI 3.1 document' } } } },
    },
  });
}
