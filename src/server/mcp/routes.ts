/**
 * The HTTP half of an MCP server's login: GET /oauth/mcp starts it, the
 * browser comes back to GET /oauth/mcp/callback, whose page posts {code,
 * state} to POST /oauth/mcp/callback; with the routes' API description.
 */
import { errorResponse, ref, type ApiDocumentPart } from '../kernel/api-doc.ts';
import { DomainError } from '../kernel/errors.ts';
import type { ModuleContext } from '../kernel/module.ts';
import { CALLBACK_SCRIPT, callbackPage, resultPage, STYLE_HASH } from './callback-page.ts';
import { CALLBACK_PATH, callbackInput, type McpLogins } from './login.ts';

/** A login's callback carries a code, a state and an issuer: a few hundred bytes. */
const CALLBACK_MAX_BYTES = 16_384;
export const SERVER_NAME = /^[a-z0-9][a-z0-9_-]{0,31}$/;
const SECURITY_HEADERS = {
  'content-security-policy': `default-src 'none'; script-src 'self'; style-src '${STYLE_HASH}'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`,
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
};

export function loginRoutes(http: ModuleContext['http'], logins: McpLogins): void {
  http.reserve('/oauth');
  http.route({
    method: 'GET', path: '/oauth/mcp', auth: 'gateway',
    handler: async (ctx) => {
      const server = typeof ctx.query.server === 'string' ? ctx.query.server : undefined;
      if (!server || !SERVER_NAME.test(server)) throw new DomainError('invalid', 'Name the MCP server: /oauth/mcp?server=<name>.');
      const { authorizationUrl } = await logins.start(server);
      const wantsJson = ctx.accepts('html', 'json') === 'json';
      if (!authorizationUrl) {
        ctx.body = { server, connected: true, message: `MCP server ${server} needs no login; it is connected.` };
        return;
      }
      if (wantsJson) {
        ctx.set('cache-control', 'no-store');
        ctx.body = { authorizationUrl };
        return;
      }
      ctx.set('cache-control', 'no-store');
      ctx.set('referrer-policy', 'no-referrer');
      ctx.redirect(authorizationUrl);
    },
  });
  http.route({
    method: 'GET', path: CALLBACK_PATH, auth: 'public',
    handler: (ctx) => {
      ctx.set(SECURITY_HEADERS);
      ctx.type = 'text/html; charset=utf-8';
      const pick = (key: string) => (typeof ctx.query[key] === 'string' ? (ctx.query[key] as string) : undefined);
      ctx.body = callbackPage({ code: pick('code'), state: pick('state'), iss: pick('iss'), error: pick('error'), error_description: pick('error_description') });
    },
  });
  http.route({
    method: 'GET', path: `${CALLBACK_PATH}.js`, auth: 'public',
    handler: (ctx) => {
      ctx.set({ ...SECURITY_HEADERS, 'cache-control': 'public, max-age=3600' });
      ctx.type = 'text/javascript; charset=utf-8';
      ctx.body = CALLBACK_SCRIPT;
    },
  });
  http.route({
    method: 'POST', path: CALLBACK_PATH, auth: 'public',
    body: { types: ['application/json', 'application/x-www-form-urlencoded'], limit: CALLBACK_MAX_BYTES },
    handler: async (ctx) => {
      const { type, value } = ctx.received!;
      const input = callbackInput(value);
      const address = ctx.req.socket.remoteAddress ?? 'unknown';
      const html = type !== 'application/json' && ctx.accepts('json', 'html') === 'html';
      try {
        const info = await logins.finish(input, address);
        if (html) {
          ctx.set(SECURITY_HEADERS);
          ctx.type = 'text/html; charset=utf-8';
          ctx.body = resultPage(true, `MCP server ${info.name} is connected${info.state === 'connected' ? ` with ${info.tools} tool${info.tools === 1 ? '' : 's'}` : ` (${info.state})`}. You can close this page.`);
          return;
        }
        ctx.set('cache-control', 'no-store');
        ctx.body = { connected: info.state === 'connected', server: info };
      } catch (error) {
        if (!html || !(error instanceof DomainError)) throw error;
        ctx.set(SECURITY_HEADERS);
        ctx.status = error.status;
        ctx.type = 'text/html; charset=utf-8';
        ctx.body = resultPage(false, error.message);
      }
    },
  });
  http.document(LOGIN_API);
}

const LOGIN_API: ApiDocumentPart = {
  paths: {
    '/oauth/mcp': {
      get: {
        summary: 'start the OAuth login of an MCP server',
        description: 'Answers 302 to the authorization server, or {"authorizationUrl"} when the client accepts JSON. Needs the gateway credential or a token with admin.',
        security: [{ bearer: ['admin'] }], 'x-required-scope': 'admin',
        parameters: [{ name: 'server', in: 'query', required: true, schema: { type: 'string', pattern: SERVER_NAME.source } }],
        responses: {
          200: { description: 'the authorization URL, or the server needs no login', content: { 'application/json': { schema: { type: 'object', properties: { authorizationUrl: { type: 'string', format: 'uri' }, server: { type: 'string' }, connected: { type: 'boolean' }, message: { type: 'string' } } } } } },
          302: { description: 'to the authorization server', headers: { Location: { schema: { type: 'string', format: 'uri' } } } },
          400: errorResponse('no server named, or a credential in the query string'),
          401: errorResponse('missing or wrong credential'),
          403: errorResponse('the credential is not the gateway\'s own nor holds admin'),
          404: errorResponse('no MCP server of that name'),
          429: errorResponse('too many requests; see Retry-After'),
          502: errorResponse('the MCP server\'s or its authorization server\'s discovery or registration failed'),
        },
      },
    },
    [CALLBACK_PATH]: {
      get: {
        summary: 'the page the authorization server sends the browser back to',
        description: 'A small page that posts {code, state} to POST /oauth/mcp/callback (a button does it without JavaScript).',
        security: [],
        parameters: ['code', 'state', 'iss', 'error', 'error_description'].map((name) => ({ name, in: 'query', required: false, schema: { type: 'string' } })),
        responses: { 200: { description: 'the page', content: { 'text/html': { schema: { type: 'string' } } } }, 429: errorResponse('too many requests; see Retry-After') },
      },
      post: {
        summary: 'finish an MCP server\'s OAuth login',
        description: 'Takes the login\'s state (single use, 10 minutes), checks iss (RFC 9207), exchanges the code with the PKCE verifier and the resource, and stores the tokens in the secret store.',
        security: [],
        requestBody: {
          required: true,
          content: {
            'application/json': { schema: ref('McpCallback') },
            'application/x-www-form-urlencoded': { schema: ref('McpCallback') },
          },
        },
        responses: {
          200: { description: 'connected (an HTML page for a form post)', content: { 'application/json': { schema: { type: 'object', required: ['connected', 'server'], properties: { connected: { type: 'boolean' }, server: { type: 'object' } } } }, 'text/html': { schema: { type: 'string' } } } },
          400: errorResponse('unknown, used or expired state (invalid_state); issuer mismatch (issuer_mismatch); the authorization server\'s own error, passed on with its description'),
          404: errorResponse('the login\'s MCP server was removed'),
          413: errorResponse('body too large'),
          415: errorResponse('neither JSON nor a form'),
          429: errorResponse('too many requests; see Retry-After'),
          502: errorResponse('the authorization server did not answer'),
        },
      },
    },
    [`${CALLBACK_PATH}.js`]: {
      get: { summary: 'the callback page\'s script', security: [], responses: { 200: { description: 'JavaScript', content: { 'text/javascript': { schema: { type: 'string' } } } } } },
    },
  },
  schemas: {
    McpCallback: {
      type: 'object',
      properties: {
        code: { type: 'string', maxLength: 4096 }, state: { type: 'string', maxLength: 512 }, iss: { type: 'string' },
        error: { type: 'string' }, error_description: { type: 'string' },
      },
    },
  },
};
