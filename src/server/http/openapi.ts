import { ERROR_CATEGORIES, schemas, type SchemaName } from '../../shared/api/schemas.ts';
import { ROUTE_SCOPES } from '../../shared/api/routes.ts';
import { gatewayVersion } from '../../shared/version.ts';

const ref = (name: SchemaName) => ({ $ref: `#/components/schemas/${name}` });
const json = (name: SchemaName, description: string) => ({ description, content: { 'application/json': { schema: ref(name) } } });
const error = (description: string) => json('Error', description);

const protectedErrors = {
  400: error('bad request, or a credential in the query string'),
  401: error('missing, unknown, expired or revoked credential'),
  403: error('the credential lacks the scope, which the message names'),
  429: error('too many requests or failed authentications; see Retry-After'),
};

const security = (route: keyof typeof ROUTE_SCOPES) => ({
  security: [{ bearer: [ROUTE_SCOPES[route]] }],
  'x-required-scope': ROUTE_SCOPES[route],
});

/** The OpenAPI 3.1 document of the job, token and webhook API, built from the schemas that validate it. */
export function openApiDocument(): Record<string, unknown> {
  return {
    openapi: '3.1.0',
    info: {
      title: 'gateway job, token and webhook API',
      version: gatewayVersion(),
      description: `Errors answer {error, message, statusCode} with error one of ${ERROR_CATEGORIES.join(', ')}.`,
    },
    components: {
      schemas,
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'the gateway credential, a product access token (gwt_...), a JWT of the configured issuer or the service key; never in a query string' },
        hubSignature: { type: 'apiKey', in: 'header', name: 'X-Hub-Signature-256', description: 'sha256=<hex HMAC-SHA256 of the raw body>' },
      },
    },
    paths: {
      '/healthz': { get: { summary: 'liveness', responses: { 200: json('Probe', 'live') } } },
      '/readyz': { get: { summary: 'readiness', responses: { 200: json('Probe', 'ready'), 503: json('Probe', 'starting or stopping') } } },
      '/openapi.json': { get: { summary: 'this document', responses: { 200: { description: 'OpenAPI 3.1 document' } } } },
      '/webhooks': {
        post: {
          summary: 'receive a webhook delivery',
          security: [{ hubSignature: [] }],
          parameters: [
            { name: 'X-GitHub-Event', in: 'header', required: true, schema: { type: 'string' } },
            { name: 'X-GitHub-Delivery', in: 'header', required: true, schema: { type: 'string' } },
            { name: 'X-GitHub-Hook-ID', in: 'header', required: false, schema: { type: 'string' } },
            { name: 'X-Hub-Signature-256', in: 'header', required: true, schema: { type: 'string', pattern: '^sha256=[0-9a-f]{64}$' } },
          ],
          requestBody: { required: true, content: { 'application/json': { schema: { type: 'object' } }, 'application/x-www-form-urlencoded': { schema: { type: 'object', properties: { payload: { type: 'string' } } } } } },
          responses: {
            200: json('DeliveryAccepted', 'recorded (or a duplicate of a recorded delivery)'),
            400: error('invalid signature, missing headers or bad payload'),
            413: error('over 25 MB'),
            415: error('another content type'),
            429: error('too many deliveries; see Retry-After'),
            503: error('no webhook secret configured'),
          },
        },
      },
      '/tokens': {
        post: {
          summary: 'create a product access token', ...security('POST /tokens'),
          requestBody: { required: true, content: { 'application/json': { schema: ref('TokenCreateRequest') } } },
          responses: { 201: json('TokenCreated', 'created; the token is shown once'), ...protectedErrors, 413: error('body too large'), 415: error('not JSON') },
        },
        get: { summary: "list the caller's tokens, masked", ...security('GET /tokens'), responses: { 200: json('TokenList', 'tokens'), ...protectedErrors } },
      },
      '/tokens/{id}': {
        delete: {
          summary: 'revoke a token', ...security('DELETE /tokens/:id'),
          parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }],
          responses: { 200: json('TokenRevoked', 'revoked'), ...protectedErrors, 404: error("not one of the caller's tokens") },
        },
      },
      '/jobs': {
        get: {
          summary: 'list jobs, newest first', ...security('GET /jobs'),
          parameters: [
            { name: 'status', in: 'query', schema: { type: 'string', enum: ['queued', 'running', 'succeeded', 'failed'] } },
            { name: 'kind', in: 'query', schema: { type: 'string' } },
            { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 200, default: 50 } },
            { name: 'cursor', in: 'query', schema: { type: 'string' } },
          ],
          responses: { 200: json('JobList', 'a page of jobs'), ...protectedErrors },
        },
      },
      '/tools/invoke': {
        post: {
          summary: 'invoke a tool', ...security('POST /tools/invoke'),
          requestBody: { required: true, content: { 'application/json': { schema: ref('ToolInvokeRequest') } } },
          responses: {
            200: json('ToolInvokeResult', 'the tool ran (or, with dryRun, would run)'),
            400: json('ToolInvokeError', 'bad request or args that fail the tool\'s schema'),
            401: json('ToolInvokeError', 'missing or wrong credential'),
            403: json('ToolInvokeError', 'the credential lacks tools:invoke'),
            404: json('ToolInvokeError', 'unknown tool, or one the policy denies over HTTP'),
            409: json('ToolInvokeError', 'the idempotency key was used for another call'),
            413: json('ToolInvokeError', 'body too large'),
            429: error('too many requests; see Retry-After'),
            500: json('ToolInvokeError', 'the tool failed'),
          },
        },
      },
      '/jobs/{id}': {
        get: {
          summary: 'one job', ...security('GET /jobs/:id'),
          parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }],
          responses: { 200: json('Job', 'the job'), ...protectedErrors, 404: error('no such job') },
        },
      },
    },
  };
}
