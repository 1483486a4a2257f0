/**
 * MCP servers as tool sources: each server in `mcp.servers` is connected over
 * streamable HTTP, its tools offered as mcp.<name>.<tool> through the tool
 * registry (so the allow/deny policy, scopes and dangerous-tool rules apply:
 * an MCP tool reaches HTTP callers and agents only once gateway.tools.allow
 * names it), and its OAuth login run by the gateway: GET /oauth/mcp starts
 * it, the browser comes back to GET /oauth/mcp/callback, whose page posts
 * {code, state} to POST /oauth/mcp/callback.
 */
import { randomBytes } from 'node:crypto';
import type { McpServerSettings } from '../../shared/config/types.ts';
import type { McpServerInfo } from '../../shared/protocol/results.ts';
import { mcpUrlProblem } from '../../shared/mcp-url.ts';
import { errorResponse, ref } from '../kernel/api-doc.ts';
import { answerOf, DomainError } from '../kernel/errors.ts';
import { defineModule, type RouteContext, type RouteVerifier, type ToolDef } from '../kernel/module.ts';
import jobsModule from '../jobs/module.ts';
import toolsModule from '../tools/module.ts';
import { CALLBACK_SCRIPT, callbackPage, resultPage, STYLE_HASH } from './callback-page.ts';
import { McpConnection, type OfferedTool } from './connection.ts';
import { McpCredentials } from './credentials.ts';
import { FlowStore, MCP_MIGRATIONS, oauthProvider, type Flow } from './oauth.ts';
import { loadMcpSdk } from './sdk.ts';

const CALLBACK_PATH = '/oauth/mcp/callback';
/** A login's callback carries a code, a state and an issuer: a few hundred bytes. */
const CALLBACK_MAX_BYTES = 16_384;
const SERVER_NAME = /^[a-z0-9][a-z0-9_-]{0,31}$/;
const SECURITY_HEADERS = {
  'content-security-policy': `default-src 'none'; script-src 'self'; style-src '${STYLE_HASH}'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`,
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
};

/** What a callback carries: the authorization response's parameters. */
interface CallbackInput {
  code?: string;
  state?: string;
  iss?: string;
  error?: string;
  error_description?: string;
}

/** A callback whose state held: its authorization response and the login it finishes. */
interface Callback {
  input: CallbackInput;
  flow: Flow;
}

/** A form posted by a browser that reads the answer as a page (the callback page's button without JavaScript). */
const wantsPage = (http: RouteContext): boolean => http.received?.type !== 'application/json' && http.accepts('json', 'html') === 'html';

const text = (value: unknown, max: number): string | undefined => (typeof value === 'string' && value.length > 0 ? value.slice(0, max) : undefined);

function callbackInput(raw: unknown): CallbackInput {
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) throw new DomainError('invalid', 'The body must be an object with code and state.');
  const body = raw as Record<string, unknown>;
  for (const key of ['code', 'state', 'iss', 'error', 'error_description']) {
    if (body[key] !== undefined && typeof body[key] !== 'string') throw new DomainError('invalid', `${key} must be a string.`);
  }
  if (typeof body.code === 'string' && body.code.length > 4096) throw new DomainError('invalid', 'code is too long.');
  if (typeof body.state === 'string' && body.state.length > 512) throw new DomainError('invalid', 'state is too long.');
  return {
    code: text(body.code, 4096), state: text(body.state, 512), iss: text(body.iss, 2048),
    error: text(body.error, 128), error_description: text(body.error_description, 500),
  };
}

export default defineModule({
  id: 'mcp',
  needs: [jobsModule, toolsModule],
  migrations: MCP_MIGRATIONS,
  async setup(ctx) {
    const flows = new FlowStore(ctx.store);
    ctx.use(jobsModule).retention('mcpOauthFlows', () => flows.prune());
    const { runner } = ctx.use(toolsModule);
    interface Entry { connection: McpConnection; credentials: McpCredentials; settings: McpServerSettings }
    const connections = new Map<string, Entry>();
    const clientName = `gateway (${ctx.daemon.profile})`;
    let started = false;

    const callbackUrl = (): string => {
      const configured = ctx.config().mcp.callbackUrl;
      if (configured) return configured;
      const base = new URL(ctx.daemon.url);
      if (base.hostname === '0.0.0.0' || base.hostname === '[::]') base.hostname = '127.0.0.1';
      return new URL(CALLBACK_PATH, base).toString();
    };

    const told = (info: McpServerInfo) => ctx.events.emit('mcp.status', info, 'operator.read');

    const add = async (name: string, settings: McpServerSettings): Promise<Entry> => {
      const credentials = new McpCredentials(ctx.secrets, name);
      const entry: Entry = {
        credentials,
        settings,
        connection: new McpConnection({
          name,
          settings: () => entry.settings,
          credentials,
          redirectUrl: callbackUrl,
          clientName,
          version: ctx.daemon.version,
          logger: ctx.log,
          savedTools: await flows.savedTools(name),
          saveTools: (tools) => void flows.saveTools(name, tools).catch((error: unknown) => ctx.log.warn({ server: name, err: error }, 'the MCP server\'s tools could not be kept')),
          onChange: told,
          onLoginLost: (reason) => void ctx.store.audit('mcp.login.lost', { subject: name, detail: { reason } }),
        }),
      };
      connections.set(name, entry);
      return entry;
    };

    /** Brings the connections in line with the configuration: new servers connect, removed ones stop, changed ones reconnect. */
    const sync = async (servers: Record<string, McpServerSettings>) => {
      for (const [name, entry] of connections) {
        if (!servers[name]) {
          connections.delete(name);
          await flows.forget(name);
          await entry.connection.stop();
          told({ name, url: entry.settings.url, state: 'disabled', reason: 'removed', tools: 0, auth: 'none' });
        }
      }
      for (const [name, settings] of Object.entries(servers)) {
        const entry = connections.get(name);
        if (!entry) {
          const added = await add(name, settings);
          if (started) void added.connection.connect();
          continue;
        }
        if (JSON.stringify(entry.settings) === JSON.stringify(settings)) continue;
        const urlChanged = entry.settings.url !== settings.url;
        entry.settings = settings;
        if (urlChanged) await entry.credentials.forget('all');
        if (started) void entry.connection.connect();
      }
    };
    for (const [name, settings] of Object.entries(ctx.config().mcp.servers)) await add(name, settings);

    const find = (name: string) => {
      const entry = connections.get(name);
      if (!entry) throw new DomainError('not_found', `No MCP server ${JSON.stringify(name)}; add it with gateway mcp add ${name} <url>.`);
      return entry;
    };

    runner.addSource({
      owner: 'mcp',
      *tools() {
        for (const { connection } of connections.values()) {
          for (const offered of connection.tools()) yield toolDef(connection, offered);
        }
      },
      get(name) {
        const [prefix, server] = name.split('.', 2);
        if (prefix !== 'mcp' || !server) return undefined;
        const connection = connections.get(server)?.connection;
        const offered = connection?.tool(name);
        return connection && offered ? toolDef(connection, offered) : undefined;
      },
    });
    // One definition per tool as the server listed it: its schema object is what the validator's cache is keyed by.
    const defs = new WeakMap<OfferedTool, ToolDef>();
    const toolDef = (connection: McpConnection, offered: OfferedTool): ToolDef => {
      let def = defs.get(offered);
      if (!def) {
        def = describeTool(connection, offered);
        defs.set(offered, def);
      }
      return def;
    };
    const describeTool = (connection: McpConnection, offered: OfferedTool): ToolDef => ({
      name: offered.name,
      description: offered.tool.description ?? offered.tool.title ?? `${offered.tool.name} of MCP server ${connection.name}`,
      inputSchema: withoutDialect(offered.tool.inputSchema as Record<string, unknown> | undefined),
      dangerous: true,
      external: `it runs on MCP server ${connection.name}`,
      handler: (args) => connection.call(offered, args),
    });

    /** Starts a login: the authorization URL to send a browser to, or none when the server needs no login. */
    const startLogin = async (name: string): Promise<{ authorizationUrl?: string }> => {
      const entry = find(name);
      const info = await entry.connection.info();
      if (info.state === 'connected' && info.auth !== 'oauth' && !entry.connection.challenged) return {};
      const sdk = await loadMcpSdk();
      const flow: Flow = { state: randomBytes(32).toString('base64url'), server: name, redirectUrl: callbackUrl() };
      const provider = oauthProvider({ credentials: entry.credentials, settings: () => entry.settings, redirectUrl: flow.redirectUrl, clientName, flow });
      let result: string;
      try {
        result = await sdk.auth(provider, { serverUrl: entry.settings.url, forceReauthorization: true, ...(entry.settings.scope ? { scope: entry.settings.scope } : {}) });
      } catch (error) {
        throw await oauthFailure(sdk, error, `Could not start the login with MCP server ${name}`, entry);
      }
      if (result === 'REDIRECT' && flow.authorizationUrl) {
        await flows.save(flow);
        ctx.log.info({ server: name }, 'MCP login started');
        return { authorizationUrl: flow.authorizationUrl };
      }
      await entry.connection.connect();
      return {};
    };

    /** An OAuth failure as the caller sees it: the authorization server's own error passed on, secrets left out. */
    const oauthFailure = async (sdk: Awaited<ReturnType<typeof loadMcpSdk>>, error: unknown, what: string, entry: { credentials: McpCredentials; settings: McpServerSettings }): Promise<DomainError> => {
      if (error instanceof DomainError) return error;
      if (sdk.IssuerMismatchError.isInstance(error) || sdk.AuthorizationServerMismatchError.isInstance(error)) {
        return new DomainError('invalid', `${what}: the authorization response did not come from the authorization server this login started with (issuer mismatch); nothing was stored. Start again.`, { code: 'issuer_mismatch' });
      }
      if (sdk.OAuthError.isInstance(error)) {
        const code = String((error as { code?: unknown }).code ?? 'oauth_error').replace(/[^a-z0-9_]/gi, '').slice(0, 64) || 'oauth_error';
        const message = (error as Error).message;
        return new DomainError('invalid', `${what}: the authorization server answered ${code}${message ? `: ${await entry.credentials.redact(message, entry.settings)}` : ''}.`, { code });
      }
      const message = await entry.credentials.redact((error as Error)?.message ?? String(error), entry.settings);
      ctx.log.warn({ err: message }, what);
      return new DomainError('upstream', `${what}: ${message}.`);
    };

    /**
     * The callback's credential, checked by the pipeline before its handler:
     * the state of a login this gateway started, taken once (kept hashed,
     * single use, 10 minutes). Its login, with the authorization response.
     */
    const callbackState: RouteVerifier = {
      body: async (req, { value }): Promise<Callback> => {
        const input = callbackInput(value);
        if (!input.state) throw new DomainError('invalid', 'The authorization response has no state.', { code: 'invalid_state' });
        const flow = await flows.take(input.state);
        if (!flow) {
          ctx.log.warn({ address: req.socket.remoteAddress }, 'MCP login callback with an unknown, used or expired state');
          throw new DomainError('invalid', 'This login is unknown, already finished or expired (a login lasts 10 minutes); start it again with gateway mcp login <server>.', { code: 'invalid_state' });
        }
        return { input, flow };
      },
    };

    /** Finishes a login with the authorization response to its state: iss checked, code exchanged with the verifier and the resource. */
    const finishLogin = async ({ input, flow }: Callback, address: string): Promise<McpServerInfo> => {
      const entry = find(flow.server);
      if (input.error) {
        const code = input.error.replace(/[^a-z0-9_]/gi, '').slice(0, 64) || 'oauth_error';
        await ctx.store.audit('mcp.login.refused', { subject: flow.server, address, detail: { error: code } });
        throw new DomainError('invalid', `The authorization server answered ${code}${input.error_description ? `: ${input.error_description.replace(/[\r\n]+/g, ' ')}` : ''}.`, { code });
      }
      if (!input.code) throw new DomainError('invalid', 'The authorization response has no code.', { code: 'invalid_request' });
      const sdk = await loadMcpSdk();
      const provider = oauthProvider({ credentials: entry.credentials, settings: () => entry.settings, redirectUrl: flow.redirectUrl, clientName, flow });
      try {
        await sdk.auth(provider, { serverUrl: entry.settings.url, authorizationCode: input.code, ...(input.iss ? { iss: input.iss } : {}), ...(entry.settings.scope ? { scope: entry.settings.scope } : {}) });
      } catch (error) {
        const failure = await oauthFailure(sdk, error, `The login with MCP server ${flow.server} failed`, entry);
        await ctx.store.audit('mcp.login.refused', { subject: flow.server, address, detail: { error: failure.code } });
        throw failure;
      }
      await ctx.store.audit('mcp.login', { subject: flow.server, address });
      ctx.log.info({ server: flow.server }, 'MCP login finished');
      await entry.connection.connect();
      return entry.connection.info();
    };

    ctx.http.reserve('/oauth');
    ctx.http.route({
      method: 'GET', path: '/oauth/mcp', auth: 'gateway',
      handler: async (http) => {
        const server = typeof http.query.server === 'string' ? http.query.server : undefined;
        if (!server || !SERVER_NAME.test(server)) throw new DomainError('invalid', 'Name the MCP server: /oauth/mcp?server=<name>.');
        const { authorizationUrl } = await startLogin(server);
        const wantsJson = http.accepts('html', 'json') === 'json';
        if (!authorizationUrl) {
          http.body = { server, connected: true, message: `MCP server ${server} needs no login; it is connected.` };
          return;
        }
        if (wantsJson) {
          http.set('cache-control', 'no-store');
          http.body = { authorizationUrl };
          return;
        }
        http.set('cache-control', 'no-store');
        http.set('referrer-policy', 'no-referrer');
        http.redirect(authorizationUrl);
      },
    });
    ctx.http.route({
      method: 'GET', path: CALLBACK_PATH, auth: 'public',
      handler: (http) => {
        http.set(SECURITY_HEADERS);
        http.type = 'text/html; charset=utf-8';
        const pick = (key: string) => (typeof http.query[key] === 'string' ? (http.query[key] as string) : undefined);
        http.body = callbackPage({ code: pick('code'), state: pick('state'), iss: pick('iss'), error: pick('error'), error_description: pick('error_description') });
      },
    });
    ctx.http.route({
      method: 'GET', path: `${CALLBACK_PATH}.js`, auth: 'public',
      handler: (http) => {
        http.set({ ...SECURITY_HEADERS, 'cache-control': 'public, max-age=3600' });
        http.type = 'text/javascript; charset=utf-8';
        http.body = CALLBACK_SCRIPT;
      },
    });
    ctx.http.route({
      method: 'POST', path: CALLBACK_PATH, auth: { verify: callbackState },
      body: { types: ['application/json', 'application/x-www-form-urlencoded'], limit: CALLBACK_MAX_BYTES },
      // A browser's form reads a page, for the login's own refusals too (from its state on); every other caller, the error body.
      errorBody: (error, http) => {
        if (!http.received || !wantsPage(http) || error.kind === 'internal') return answerOf(error).body;
        http.set(SECURITY_HEADERS);
        http.type = 'text/html; charset=utf-8';
        return resultPage(false, error.message);
      },
      handler: async (http) => {
        const info = await finishLogin(http.verified as Callback, http.req.socket.remoteAddress ?? 'unknown');
        if (wantsPage(http)) {
          http.set(SECURITY_HEADERS);
          http.type = 'text/html; charset=utf-8';
          http.body = resultPage(true, `MCP server ${info.name} is connected${info.state === 'connected' ? ` with ${info.tools} tool${info.tools === 1 ? '' : 's'}` : ` (${info.state})`}. You can close this page.`);
          return;
        }
        http.set('cache-control', 'no-store');
        http.body = { connected: info.state === 'connected', server: info };
      },
    });
    ctx.http.document({
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
    });

    ctx.rpc.method({ name: 'mcp.list', handler: async () => ({ servers: await Promise.all([...connections.values()].map(({ connection }) => connection.info())) }) });
    ctx.rpc.method({
      name: 'mcp.tools',
      handler: async ({ name }) => {
        const { connection } = find(name);
        const overHttp = new Set(runner.catalog('http').map((tool) => tool.name));
        return { server: await connection.info(), tools: connection.toolInfo((tool) => overHttp.has(tool)) };
      },
    });
    ctx.rpc.method({
      name: 'mcp.login',
      handler: async ({ name }) => {
        const { authorizationUrl } = await startLogin(name);
        return { server: await find(name).connection.info(), callbackUrl: callbackUrl(), ...(authorizationUrl ? { authorizationUrl } : {}) };
      },
    });
    ctx.rpc.method({
      name: 'mcp.logout',
      handler: async ({ name }, client) => {
        const { connection } = find(name);
        await connection.logout();
        await flows.drop(name);
        await ctx.store.audit('mcp.logout', { actor: client.deviceId, subject: name, address: client.address });
        return { server: await connection.info() };
      },
    });

    ctx.configCheck((next) => Object.entries(next.mcp.servers).flatMap(([name, server]) => {
      const problem = mcpUrlProblem(server.url);
      return problem ? [`mcp.servers.${name}.url: ${problem}`] : [];
    }));
    ctx.watch.config((next) => void sync(next.mcp.servers).catch((error: unknown) => ctx.log.error({ err: error }, 'applying the MCP servers failed')));
    ctx.watch.secrets(['mcp.servers.*'], (name) => {
      const server = name.split('.')[2]!;
      const entry = connections.get(server);
      if (!entry) return;
      entry.credentials.reset();
      void entry.connection.connect();
    });
    ctx.onStart(() => {
      started = true;
      for (const { connection } of connections.values()) void connection.connect();
    });
    ctx.onStop(async () => {
      started = false;
      await Promise.all([...connections.values()].map(({ connection }) => connection.stop()));
    });
  },
});

/** An input schema as the gateway's validator takes it: the server's $schema dialect marker left out. */
function withoutDialect(schema: Record<string, unknown> | undefined): Record<string, unknown> {
  if (!schema || typeof schema !== 'object') return { type: 'object' };
  const { $schema: _dialect, ...rest } = schema;
  return rest;
}
