/**
 * MCP servers for the tests, real parts on loopback: the OAuth-protected
 * example server that ships in @modelcontextprotocol/sdk 1.x (its demo
 * authorization server approves by itself), and a strict pair: oidc-provider
 * as the authorization server (PKCE required, resource indicators, JWT access
 * tokens for the resource, refresh token rotation, iss in the authorization
 * response) in front of a small MCP server that checks the bearer token's
 * signature, issuer and audience on every request.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { join } from 'node:path';
import { createRemoteJWKSet, jwtVerify } from 'jose';
import Provider, { errors as oidcErrors } from 'oidc-provider';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { InMemoryEventStore } from '@modelcontextprotocol/sdk/examples/shared/inMemoryEventStore.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import { CallToolRequestSchema, isInitializeRequest, ListToolsRequestSchema, type ServerNotification, type ServerRequest } from '@modelcontextprotocol/sdk/types.js';
import { freePort, ROOT } from './cli.ts';

export interface ExampleServer {
  url: string;
  authUrl: string;
  stop(): void;
}

/** The SDK's simpleStreamableHttp example with --oauth, in a child process. */
export async function startExampleServer(): Promise<ExampleServer> {
  const [port, authPort] = [await freePort(), await freePort()];
  const script = join(ROOT, 'node_modules/@modelcontextprotocol/sdk/dist/esm/examples/server/simpleStreamableHttp.js');
  const child: ChildProcess = spawn(process.execPath, [script, '--oauth'], { env: { ...process.env, MCP_PORT: String(port), MCP_AUTH_PORT: String(authPort) }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the example MCP server did not start:\n${output}`)), 20_000);
    const seen = (chunk: Buffer) => {
      output += chunk;
      if (/MCP Streamable HTTP Server listening/.test(output) && /Authorization Server listening/.test(output)) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout!.on('data', seen);
    child.stderr!.on('data', seen);
    child.once('exit', (code) => reject(new Error(`the example MCP server exited (${code}):\n${output}`)));
  });
  return { url: `http://localhost:${port}/mcp`, authUrl: `http://localhost:${authPort}`, stop: () => child.kill('SIGKILL') };
}

/** A browser that follows redirects and keeps cookies, for an authorization server that approves by itself. */
export async function followLogin(authorizationUrl: string, stopAt: string): Promise<URL> {
  const jar = new Map<string, string>();
  let url = authorizationUrl;
  for (let hop = 0; hop < 20; hop++) {
    if (url.startsWith(stopAt)) return new URL(url);
    const res = await fetch(url, { redirect: 'manual', headers: { cookie: [...jar].map(([k, v]) => `${k}=${v}`).join('; ') } });
    for (const cookie of res.headers.getSetCookie()) {
      const [pair] = cookie.split(';');
      const eq = pair!.indexOf('=');
      jar.set(pair!.slice(0, eq).trim(), pair!.slice(eq + 1).trim());
    }
    const location = res.headers.get('location');
    if (!location) throw new Error(`the login stopped at ${url} with ${res.status}: ${(await res.text()).slice(0, 500)}`);
    url = new URL(location, url).toString();
  }
  throw new Error('too many redirects');
}

/** oidc-provider's storage, in memory, one map per server. */
function memoryAdapter(records: Map<string, Record<string, unknown>>) {
  return class MemoryAdapter {
    private readonly model: string;
    constructor(model: string) {
      this.model = model;
    }
    private key(id: string) {
      return `${this.model}:${id}`;
    }
    async upsert(id: string, payload: Record<string, unknown>) {
      records.set(this.key(id), payload);
    }
    async find(id: string) {
      return records.get(this.key(id));
    }
    async findByUid(uid: string) {
      for (const [key, payload] of records) if (key.startsWith(`${this.model}:`) && payload.uid === uid) return payload;
      return undefined;
    }
    async findByUserCode(userCode: string) {
      for (const [key, payload] of records) if (key.startsWith(`${this.model}:`) && payload.userCode === userCode) return payload;
      return undefined;
    }
    async consume(id: string) {
      const payload = records.get(this.key(id));
      if (payload) payload.consumed = Math.floor(Date.now() / 1000);
    }
    async destroy(id: string) {
      records.delete(this.key(id));
    }
    async revokeByGrantId(grantId: string) {
      for (const [key, payload] of records) if (payload.grantId === grantId) records.delete(key);
    }
  };
}

export interface ToolSpec {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
  outputSchema?: Record<string, unknown>;
  /** Runs the tool; what it throws answers as a JSON-RPC error (an McpError keeps its code). */
  run: (args: Record<string, unknown>, extra: RequestHandlerExtra<ServerRequest, ServerNotification>) => unknown;
}

const ECHO: ToolSpec = {
  name: 'echo',
  description: 'Echoes its text',
  inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
  run: (args) => ({ content: [{ type: 'text', text: String(args.text) }] }),
};

/** oidc-provider in front of an MCP server that checks its tokens. */
export class StrictMcp {
  issuer = '';
  url = '';
  private provider!: InstanceType<typeof Provider>;
  private asServer!: HttpServer;
  private mcpServer: HttpServer | undefined;
  private mcpPort = 0;
  private readonly sockets = new Set<Socket>();
  private readonly sessions = new Map<string, { transport: StreamableHTTPServerTransport; server: Server }>();
  readonly tools: ToolSpec[] = [ECHO];
  /** Grants the token endpoint made, by type. */
  readonly grants: string[] = [];
  /** Access tokens the MCP server accepted, and refused. */
  accepted = 0;
  refused = 0;
  /** The next interaction answers this error instead of approving. */
  denyNext: { error: string; error_description: string } | undefined;
  private readonly accessTokenTtl: number;
  /** Serve MCP without asking for a token (a server with no login). */
  private readonly open: boolean;
  /** Answer requests with a JSON body instead of an event stream. */
  private readonly json: boolean;
  /** Keep events for resumption (a tool may then close its call's stream and the client takes it up again). */
  private readonly resumable: boolean;
  /** The next requests bearing a valid token are refused with 401 all the same (a token the server stopped accepting). */
  refuseNext = 0;
  /** Tool calls the server ran. */
  toolCalls = 0;
  /** The next POST is answered with this status and text instead of being served. */
  failNext: { status: number; text: string } | undefined;
  /** The GET requests that took up a stream again, by their Last-Event-ID. */
  readonly resumed: string[] = [];

  constructor(options: { accessTokenTtl?: number; open?: boolean; json?: boolean; resumable?: boolean } = {}) {
    this.accessTokenTtl = options.accessTokenTtl ?? 3600;
    this.open = options.open ?? false;
    this.json = options.json ?? false;
    this.resumable = options.resumable ?? false;
  }

  async start(): Promise<this> {
    const asPort = await freePort();
    this.mcpPort = await freePort();
    this.issuer = `http://127.0.0.1:${asPort}`;
    this.url = `http://127.0.0.1:${this.mcpPort}/mcp`;
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const jwk = { ...privateKey.export({ format: 'jwk' }), kid: 'test-key', alg: 'RS256', use: 'sig' };
    const resource = this.url;
    const ttl = this.accessTokenTtl;
    this.provider = new Provider(this.issuer, {
      adapter: memoryAdapter(this.records),
      jwks: { keys: [jwk as never] },
      features: {
        devInteractions: { enabled: false },
        registration: { enabled: true },
        revocation: { enabled: true },
        resourceIndicators: {
          enabled: true,
          defaultResource: () => resource,
          useGrantedResource: () => true,
          getResourceServerInfo: (_ctx: unknown, indicator: string) => {
            if (indicator !== resource) throw new oidcErrors.InvalidTarget();
            return { scope: 'mcp:tools', audience: resource, accessTokenTTL: ttl, accessTokenFormat: 'jwt', jwt: { sign: { alg: 'RS256' } } };
          },
        },
      },
      scopes: ['openid', 'offline_access', 'mcp:tools'],
      pkce: { required: () => true },
      interactions: { url: (_ctx: unknown, interaction: { uid: string }) => `/interaction/${interaction.uid}` },
      findAccount: (_ctx: unknown, sub: string) => ({ accountId: sub, claims: async () => ({ sub }) }),
      issueRefreshToken: async (_ctx: unknown, client: { grantTypeAllowed(type: string): boolean }) => client.grantTypeAllowed('refresh_token'),
      rotateRefreshToken: true,
      ttl: { AccessToken: ttl, RefreshToken: 86_400, AuthorizationCode: 60, Grant: 86_400, Interaction: 600, Session: 86_400 },
    } as never);
    this.provider.on('grant.success', (ctx: { oidc: { params: { grant_type?: string } } }) => this.grants.push(String(ctx.oidc.params.grant_type)));
    this.provider.use(async (ctx, next) => {
      const match = /^\/interaction\/([^/]+)$/.exec(ctx.path);
      if (!match) return next();
      const details = await this.provider.interactionDetails(ctx.req, ctx.res);
      let result: Record<string, unknown>;
      if (this.denyNext) {
        result = { ...this.denyNext };
        this.denyNext = undefined;
      } else if (details.prompt.name === 'login') {
        result = { login: { accountId: 'alice' } };
      } else {
        const grant = details.grantId
          ? (await this.provider.Grant.find(details.grantId))!
          : new this.provider.Grant({ accountId: details.session!.accountId, clientId: details.params.client_id as string });
        const missing = details.prompt.details as { missingOIDCScope?: string[]; missingResourceScopes?: Record<string, string[]> };
        if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
        for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes ?? {})) grant.addResourceScope(indicator, scopes.join(' '));
        result = { consent: { grantId: await grant.save() } };
      }
      await this.provider.interactionFinished(ctx.req, ctx.res, result, { mergeWithLastSubmission: true });
    });
    this.asServer = createServer(this.provider.callback());
    await new Promise<void>((resolve) => this.asServer.listen(asPort, '127.0.0.1', resolve));
    await this.startMcp();
    return this;
  }

  /** What the authorization server keeps (grants, codes, tokens, sessions), by model and id. */
  private readonly records = new Map<string, Record<string, unknown>>();

  /** Revokes every refresh token the authorization server issued: the next refresh is refused. */
  async revokeRefreshTokens(): Promise<void> {
    for (const key of [...this.records.keys()]) if (key.startsWith('RefreshToken:')) this.records.delete(key);
  }

  /** Starts (or restarts, on the same port) the MCP server. */
  async startMcp(): Promise<void> {
    const jwks = createRemoteJWKSet(new URL(`${this.issuer}/jwks`));
    const metadataPath = '/.well-known/oauth-protected-resource/mcp';
    const challenge = `Bearer error="invalid_token", resource_metadata="http://127.0.0.1:${this.mcpPort}${metadataPath}"`;
    this.mcpServer = createServer((req, res) => void this.handle(req, res, jwks, metadataPath, challenge).catch((error: unknown) => {
      if (!res.headersSent) res.writeHead(500).end(String(error));
    }));
    this.mcpServer.on('connection', (socket) => {
      this.sockets.add(socket);
      socket.once('close', () => this.sockets.delete(socket));
    });
    await new Promise<void>((resolve) => this.mcpServer!.listen(this.mcpPort, '127.0.0.1', resolve));
  }

  private async handle(req: IncomingMessage, res: ServerResponse, jwks: ReturnType<typeof createRemoteJWKSet>, metadataPath: string, challenge: string): Promise<void> {
    if (req.url === metadataPath) {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({
        resource: this.url, authorization_servers: [this.issuer], scopes_supported: ['mcp:tools'], bearer_methods_supported: ['header'],
      }));
      return;
    }
    if (!req.url?.startsWith('/mcp')) {
      res.writeHead(404).end();
      return;
    }
    const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    if (this.failNext && req.method === 'POST') {
      const { status, text } = this.failNext;
      this.failNext = undefined;
      req.resume();
      res.writeHead(status, { 'content-type': 'text/plain' }).end(text);
      return;
    }
    try {
      if (this.open) return void (await this.serve(req, res));
      if (!token) throw new Error('no token');
      await jwtVerify(token, jwks, { issuer: this.issuer, audience: this.url });
      if (this.refuseNext > 0) {
        this.refuseNext--;
        throw new Error('refused');
      }
      this.accepted++;
    } catch {
      this.refused++;
      res.writeHead(401, { 'www-authenticate': challenge, 'content-type': 'application/json' }).end(JSON.stringify({ error: 'invalid_token' }));
      return;
    }
    await this.serve(req, res);
  }

  private async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let body: unknown;
    if (req.method === 'POST') {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    }
    const sessionId = req.headers['mcp-session-id'] as string | undefined;
    const lastEventId = req.headers['last-event-id'];
    if (req.method === 'GET' && typeof lastEventId === 'string') this.resumed.push(lastEventId);
    let session = sessionId ? this.sessions.get(sessionId) : undefined;
    if (!session && req.method === 'POST' && isInitializeRequest(body)) {
      const server = this.mcpProtocolServer();
      const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        enableJsonResponse: this.json,
        ...(this.resumable ? { eventStore: new InMemoryEventStore(), retryInterval: 50 } : {}),
        onsessioninitialized: (id) => {
          this.sessions.set(id, { transport, server });
        },
      });
      transport.onclose = () => {
        if (transport.sessionId) this.sessions.delete(transport.sessionId);
      };
      await server.connect(transport);
      session = { transport, server };
    }
    if (!session) {
      res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null }));
      return;
    }
    await session.transport.handleRequest(req, res, body);
  }

  private mcpProtocolServer(): Server {
    const server = new Server({ name: 'strict-test-server', version: '1.0.0' }, { capabilities: { tools: { listChanged: true } } });
    server.setRequestHandler(ListToolsRequestSchema, async () => ({
      tools: this.tools.map(({ name, description, inputSchema, outputSchema }) => ({ name, description, inputSchema, ...(outputSchema ? { outputSchema } : {}) })),
    }));
    server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
      this.toolCalls++;
      const tool = this.tools.find((t) => t.name === request.params.name);
      if (!tool) return { content: [{ type: 'text', text: `no tool ${request.params.name}` }], isError: true };
      return (await tool.run(request.params.arguments ?? {}, extra)) as never;
    });
    return server;
  }

  /** Adds a tool and tells every connected client its list changed. */
  async addTool(tool: ToolSpec): Promise<void> {
    this.tools.push(tool);
    await Promise.all([...this.sessions.values()].map(({ server }) => server.sendToolListChanged().catch(() => undefined)));
  }

  /** Stops the MCP server at once, connections and sessions included (the authorization server stays). */
  async stopMcp(): Promise<void> {
    for (const { transport } of this.sessions.values()) await transport.close().catch(() => undefined);
    this.sessions.clear();
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => (this.mcpServer ? this.mcpServer.close(() => resolve()) : resolve()));
    this.mcpServer = undefined;
  }

  async stop(): Promise<void> {
    await this.stopMcp();
    await new Promise<void>((resolve) => this.asServer.close(() => resolve()));
    this.asServer.closeAllConnections();
  }
}
