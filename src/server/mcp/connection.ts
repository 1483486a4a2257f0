/**
 * One MCP server: its connection over streamable HTTP, its tools, its state
 * (connecting, connected, needs-login, error, disabled), reconnection with
 * backoff, and the refresh of its OAuth tokens before they expire.
 */
import type { Logger } from 'pino';
import type { Client, OAuthDiscoveryState, StreamableHTTPClientTransport, Tool } from '@modelcontextprotocol/client';
import type { McpServerSettings } from '../../shared/config/types.ts';
import type { McpServerInfo, McpState, McpToolInfo } from '../../shared/protocol/results.ts';
import { DomainError } from '../kernel/errors.ts';
import { compileSchema, describeProblems, loadSchemaCompiler } from '../kernel/schema.ts';
import { upstreamFetch } from '../kernel/upstream-fetch.ts';
import type { McpCredentials } from './credentials.ts';
import { callToolDirect, McpCallError, McpCallTimeout } from './direct-call.ts';
import { LoginRequired, oauthProvider } from './oauth.ts';
import { loadMcpSdk } from './sdk.ts';

/** Tool names the gateway can register: what its registry accepts after the `mcp.<name>.` prefix. */
const TOOL_NAME = /^[A-Za-z0-9_.:-]+$/;
const MAX_NAME = 64;
const BACKOFF_MS = [1000, 2000, 5000, 10_000, 30_000, 60_000];
/** Refresh this long before the access token expires (or at two thirds of its life, when it is shorter). */
const REFRESH_AHEAD_MS = 60_000;

export interface ConnectionDeps {
  name: string;
  settings: () => McpServerSettings;
  credentials: McpCredentials;
  redirectUrl: () => string;
  clientName: string;
  version: string;
  logger: Logger;
  /** Tools as last seen, and where to keep them across restarts. */
  savedTools: Tool[];
  saveTools: (tools: Tool[]) => void;
  onChange: (server: McpServerInfo) => void;
  /** A refused refresh or a lost login: for the audit. */
  onLoginLost: (reason: string) => void;
}

/** An MCP tool as the gateway offers it. */
export interface OfferedTool {
  /** The gateway's name: mcp.<server>.<tool>. */
  name: string;
  tool: Tool;
}

const jitter = (ms: number) => Math.round(ms * (0.8 + Math.random() * 0.4));

export class McpConnection {
  readonly name: string;
  private readonly deps: ConnectionDeps;
  private client: Client | undefined;
  /** The connected client's transport and the static headers it sends: what a direct tools/call needs of the session. */
  private session: { transport: StreamableHTTPClientTransport; url: URL; headers: Record<string, string> } | undefined;
  private callIds = 0;
  private stateValue: McpState = 'connecting';
  private reason: string | undefined;
  private offered = new Map<string, OfferedTool>();
  private skipped: string[] = [];
  private attempts = 0;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private refreshTimer: NodeJS.Timeout | undefined;
  private stopped = false;
  private connecting: Promise<void> | undefined;
  private readonly discovery: { value?: OAuthDiscoveryState } = {};
  private connectedAt: number | undefined;
  /** The server asked for a login (answered 401) at some point: it is an OAuth server. */
  challenged = false;

  constructor(deps: ConnectionDeps) {
    this.deps = deps;
    this.name = deps.name;
    this.setTools(deps.savedTools, false);
  }

  get state(): McpState {
    return this.stateValue;
  }

  tools(): OfferedTool[] {
    return [...this.offered.values()];
  }

  tool(name: string): OfferedTool | undefined {
    return this.offered.get(name);
  }

  async info(): Promise<McpServerInfo> {
    const settings = this.deps.settings();
    const tokens = await this.deps.credentials.tokens();
    return {
      name: this.name,
      url: settings.url,
      state: this.stateValue,
      ...(this.reason ? { reason: this.reason } : {}),
      tools: this.offered.size,
      ...(this.skipped.length ? { skippedTools: this.skipped } : {}),
      auth: tokens ? 'oauth' : settings.headers.length > 0 ? 'headers' : 'none',
      ...(tokens?.expiresAt ? { tokenExpiresAt: tokens.expiresAt } : {}),
      ...(tokens ? { tokenReceivedAt: tokens.receivedAt, refreshable: Boolean(tokens.refresh_token) } : {}),
      ...(this.connectedAt ? { connectedAt: this.connectedAt } : {}),
    };
  }

  private async setState(state: McpState, reason?: string): Promise<void> {
    const changed = state !== this.stateValue || reason !== this.reason;
    this.stateValue = state;
    this.reason = reason === undefined ? undefined : await this.scrub(reason);
    if (changed) this.deps.onChange(await this.info());
  }

  /** A reason fit to show: no secret value, one line, bounded. */
  private scrub(text: string): Promise<string> {
    return this.deps.credentials.redact(text, this.deps.settings());
  }

  private setTools(tools: Tool[], save = true): void {
    const offered = new Map<string, OfferedTool>();
    const skipped: string[] = [];
    for (const tool of tools) {
      const name = `mcp.${this.name}.${tool.name}`;
      if (typeof tool.name !== 'string' || !TOOL_NAME.test(tool.name) || name.length > MAX_NAME) {
        skipped.push(String(tool.name).slice(0, 80));
        continue;
      }
      offered.set(name, { name, tool });
    }
    this.offered = offered;
    this.skipped = skipped;
    if (skipped.length) this.deps.logger.warn({ server: this.name, skipped }, 'MCP tools with names the gateway cannot offer were left out');
    if (save) this.deps.saveTools(tools);
  }

  /** Connects now (or joins the attempt under way). */
  connect(): Promise<void> {
    this.connecting ??= this.attempt().finally(() => {
      this.connecting = undefined;
    });
    return this.connecting;
  }

  private provider() {
    return oauthProvider({
      credentials: this.deps.credentials,
      settings: this.deps.settings,
      redirectUrl: this.deps.redirectUrl(),
      clientName: this.deps.clientName,
      discovery: this.discovery,
      onInvalidate: (scope) => this.deps.logger.info({ server: this.name, scope }, 'the authorization server refused stored MCP credentials; they are dropped'),
    });
  }

  private async attempt(): Promise<void> {
    if (this.stopped) return;
    clearTimeout(this.reconnectTimer);
    const settings = this.deps.settings();
    if (!settings.enabled) {
      await this.setState('disabled');
      return;
    }
    await this.setState('connecting', this.reason);
    await this.closeClient();
    const sdk = await loadMcpSdk();
    const { headers, missing } = await this.deps.credentials.headers(settings);
    if (missing.length > 0) {
      await this.setState('error', `missing secret ${missing.join(', ')}: gateway secrets set ${missing[0]}`);
      return;
    }
    const client = new sdk.Client({ name: this.deps.clientName, version: this.deps.version }, {
      listChanged: {
        tools: {
          onChanged: (error, tools) => {
            if (this.client !== client) return;
            if (error) {
              this.deps.logger.warn({ server: this.name, err: error.message }, 'the MCP server changed its tools, and listing them failed');
              return;
            }
            if (tools) {
              this.setTools(tools);
              this.deps.logger.info({ server: this.name, tools: this.offered.size }, 'MCP tools changed');
              void this.info().then(this.deps.onChange);
            }
          },
        },
      },
    });
    const transport = new sdk.StreamableHTTPClientTransport(new URL(settings.url), {
      authProvider: this.provider(),
      requestInit: { headers },
      // The kept-alive node:http fetch the model providers use: a call's first byte comes back sooner than with the built-in one.
      fetch: (input: string | URL, init?: RequestInit) => upstreamFetch(input, init, undefined),
      ...(settings.scope ? { scope: settings.scope } : {}),
    } as ConstructorParameters<typeof sdk.StreamableHTTPClientTransport>[1]);
    client.onclose = () => {
      if (this.client !== client || this.stopped) return;
      this.client = undefined;
      this.session = undefined;
      this.connectedAt = undefined;
      void this.setState('error', 'the connection closed').then(() => this.scheduleReconnect());
    };
    client.onerror = (error) => {
      if (this.client === client) this.deps.logger.debug({ server: this.name, err: error.message }, 'MCP transport error');
    };
    try {
      await client.connect(transport, { timeout: settings.timeoutMs });
      const tools = await this.listTools(client, settings.timeoutMs);
      if (this.stopped) {
        await client.close().catch(() => undefined);
        return;
      }
      this.client = client;
      this.session = { transport, url: new URL(settings.url), headers: Object.fromEntries(Object.entries(headers).map(([name, value]) => [name.toLowerCase(), value])) };
      this.attempts = 0;
      this.connectedAt = Date.now();
      this.setTools(tools);
      await this.setState('connected');
      this.deps.logger.info({ server: this.name, tools: this.offered.size }, 'MCP server connected');
      await this.scheduleRefresh();
    } catch (error) {
      await client.close().catch(() => undefined);
      await this.failed(error);
    }
  }

  private async listTools(client: Client, timeout: number): Promise<Tool[]> {
    const tools: Tool[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 100; page++) {
      const result = await client.listTools(cursor ? { cursor } : undefined, { timeout });
      tools.push(...result.tools);
      cursor = result.nextCursor;
      if (!cursor) break;
    }
    return tools;
  }

  private async failed(error: unknown): Promise<void> {
    if (this.stopped) return;
    const sdk = await loadMcpSdk();
    if (error instanceof LoginRequired || (error as { name?: string })?.name === 'LoginRequired' || sdk.UnauthorizedError.isInstance(error)) {
      this.challenged = true;
      const hadTokens = Boolean(await this.deps.credentials.tokens());
      await this.setState('needs-login', `log in: gateway mcp login ${this.name}`);
      this.deps.logger.warn({ server: this.name }, 'the MCP server needs a login (gateway mcp login)');
      if (hadTokens) this.deps.onLoginLost('the server refused the stored credentials');
      return;
    }
    await this.setState('error', describe(error));
    this.deps.logger.warn({ server: this.name, reason: this.reason }, 'MCP server unreachable; retrying');
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    if (this.stopped || this.reconnectTimer?.hasRef()) return;
    const delay = jitter(BACKOFF_MS[Math.min(this.attempts, BACKOFF_MS.length - 1)]!);
    this.attempts++;
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      void this.connect();
    }, delay);
    this.reconnectTimer.unref();
  }

  /** Refreshes the tokens ahead of their expiry, rotation included; a refused refresh means a new login. */
  private async scheduleRefresh(): Promise<void> {
    clearTimeout(this.refreshTimer);
    const tokens = await this.deps.credentials.tokens();
    if (!tokens?.expiresAt || !tokens.refresh_token || this.stopped) return;
    const life = tokens.expiresAt - tokens.receivedAt;
    const ahead = Math.min(REFRESH_AHEAD_MS, Math.floor(life / 3));
    const delay = Math.max(0, tokens.expiresAt - ahead - Date.now());
    this.refreshTimer = setTimeout(() => void this.refresh(), Math.min(delay, 2 ** 31 - 1));
    this.refreshTimer.unref();
  }

  /** Refreshes the tokens now; false when the server then needs a new login. */
  async refresh(): Promise<boolean> {
    if (this.stopped) return false;
    const sdk = await loadMcpSdk();
    const settings = this.deps.settings();
    try {
      const result = await sdk.auth(this.provider(), { serverUrl: settings.url, ...(settings.scope ? { scope: settings.scope } : {}) });
      if (result === 'AUTHORIZED') {
        this.deps.logger.info({ server: this.name }, 'MCP tokens refreshed');
        void this.info().then(this.deps.onChange);
        await this.scheduleRefresh();
        return true;
      }
      return false;
    } catch (error) {
      if (error instanceof LoginRequired || (error as { name?: string })?.name === 'LoginRequired') {
        await this.closeClient();
        await this.setState('needs-login', `the authorization server refused to refresh the login: gateway mcp login ${this.name}`);
        this.deps.logger.warn({ server: this.name }, 'MCP token refresh refused; the server needs a new login (gateway mcp login)');
        this.deps.onLoginLost('the authorization server refused the refresh token');
        return false;
      }
      // The authorization server is away: try again shortly, while the token lasts.
      this.deps.logger.warn({ server: this.name, reason: await this.scrub(describe(error)) }, 'MCP token refresh failed; retrying');
      clearTimeout(this.refreshTimer);
      this.refreshTimer = setTimeout(() => void this.refresh(), 15_000);
      this.refreshTimer.unref();
      return false;
    }
  }

  /** Calls a tool of the server: unavailable (503) unless connected. */
  async call(offered: OfferedTool, args: Record<string, unknown>): Promise<unknown> {
    // A call that comes while the server is being connected (the daemon just started) waits for the attempt.
    if (this.connecting) await this.connecting;
    const client = this.client;
    if (!client || this.stateValue !== 'connected') {
      throw new DomainError('unavailable', `MCP server ${this.name} is ${this.stateValue}${this.reason ? ` (${this.reason})` : ''}; its tools are unavailable until it connects.`, { retryable: true });
    }
    const settings = this.deps.settings();
    try {
      // The client is given the tool without its output schema: the result is checked below, one way whichever path it took.
      const result = (await this.callDirect(client, offered, args, settings.timeoutMs))
        ?? await client.callTool({ name: offered.tool.name, arguments: args }, { timeout: settings.timeoutMs, toolDefinition: { ...offered.tool, outputSchema: undefined } });
      const { _meta: _ignored, ...rest } = await this.checked(offered, result as Record<string, unknown>);
      return rest;
    } catch (error) {
      if (error instanceof McpCallTimeout) throw new DomainError('upstream', `MCP server ${this.name} did not answer within ${settings.timeoutMs} ms.`);
      const sdk = await loadMcpSdk();
      if (sdk.ProtocolError.isInstance(error) || error instanceof McpCallError) {
        const code = (error as { code?: number }).code;
        if (code === sdk.ProtocolErrorCode.InvalidParams) throw new DomainError('invalid', `MCP server ${this.name} refused the arguments: ${await this.scrub((error as Error).message)}`);
        throw new DomainError('upstream', `MCP server ${this.name} failed the call: ${await this.scrub((error as Error).message)}`);
      }
      if (sdk.SdkError.isInstance(error) && (error as { code?: unknown }).code === sdk.SdkErrorCode.RequestTimeout) {
        throw new DomainError('upstream', `MCP server ${this.name} did not answer within ${settings.timeoutMs} ms.`);
      }
      if (error instanceof LoginRequired || sdk.UnauthorizedError.isInstance(error)) {
        await this.failed(error);
        throw new DomainError('unavailable', `MCP server ${this.name} needs a login: gateway mcp login ${this.name}`);
      }
      // The server went away: its tools are unavailable until it comes back.
      if (this.client === client) {
        this.client = undefined;
        this.session = undefined;
        this.connectedAt = undefined;
        await client.close().catch(() => undefined);
        await this.setState('error', describe(error));
        this.scheduleReconnect();
      }
      throw new DomainError('unavailable', `MCP server ${this.name} is unreachable (${this.reason}); retrying in the background.`, { retryable: true });
    }
  }

  /**
   * The call as one POST of the session the client opened (see
   * direct-call.ts); undefined when the client must make it: a protocol era
   * this does not speak, or a server that refused it before running it (a
   * login to renew, a lost session).
   */
  private async callDirect(client: Client, offered: OfferedTool, args: Record<string, unknown>, timeoutMs: number): Promise<Record<string, unknown> | undefined> {
    const session = this.session;
    const version = session?.transport.protocolVersion;
    if (!session || !version || client.getProtocolEra() !== 'legacy') return undefined;
    const headers: Record<string, string> = { ...session.headers, 'mcp-protocol-version': version };
    const access = (await this.deps.credentials.tokens())?.access_token;
    if (access) headers.authorization = `Bearer ${access}`;
    if (session.transport.sessionId) headers['mcp-session-id'] = session.transport.sessionId;
    const id = `gateway-${++this.callIds}`;
    try {
      return await callToolDirect({
        url: session.url, headers, id, name: offered.tool.name, args, timeoutMs,
        deliver: (message) => session.transport.onmessage?.(message as never),
      });
    } catch (error) {
      if (error instanceof McpCallTimeout) void client.notification({ method: 'notifications/cancelled', params: { requestId: id, reason: error.message } }).catch(() => undefined);
      throw error;
    }
  }

  /**
   * A tool's result as the MCP client checks it: content a list (none is an
   * empty one), and structured content that matches the tool's output schema
   * when it has one. A result that fails is the server's fault (502).
   */
  private async checked(offered: OfferedTool, result: Record<string, unknown>): Promise<Record<string, unknown>> {
    const fault = (message: string) => new McpCallError(-32603, message);
    if (result.content === undefined) result.content = [];
    if (!Array.isArray(result.content)) throw fault('its result\'s content is not a list');
    const schema = offered.tool.outputSchema as Record<string, unknown> | undefined;
    if (!schema || result.isError) return result;
    if (result.structuredContent === undefined) throw fault(`tool ${offered.tool.name} has an output schema but returned no structured content`);
    await loadSchemaCompiler();
    let validate: ReturnType<typeof compileSchema>;
    try {
      validate = compileSchema(schema);
    } catch (error) {
      throw fault(`tool ${offered.tool.name} has an output schema that is not a valid JSON Schema: ${String((error as Error)?.message ?? error).slice(0, 200)}`);
    }
    if (!validate(result.structuredContent)) {
      throw fault(`the structured content does not match the tool's output schema: ${describeProblems(validate.errors, 'structuredContent').join('; ')}`);
    }
    return result;
  }

  private async closeClient(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    this.session = undefined;
    this.connectedAt = undefined;
    if (client) await client.close().catch(() => undefined);
  }

  /** Forgets the login (tokens kept in the secret store) and disconnects. */
  async logout(): Promise<void> {
    clearTimeout(this.refreshTimer);
    await this.closeClient();
    await this.deps.credentials.forget('tokens');
    this.discovery.value = undefined;
    await this.setState('needs-login', `logged out: gateway mcp login ${this.name}`);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.reconnectTimer);
    clearTimeout(this.refreshTimer);
    await this.closeClient();
  }

  /** The tools as `gateway mcp tools` shows them. */
  toolInfo(overHttp: (name: string) => boolean): McpToolInfo[] {
    return this.tools().map(({ name, tool }) => ({
      name, tool: tool.name, description: tool.description ?? '', inputSchema: (tool.inputSchema ?? { type: 'object' }) as Record<string, unknown>, overHttp: overHttp(name),
    }));
  }
}

/** What went wrong, in a line: the cause of a failed fetch names the network error. */
function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  const detail = cause?.code ?? cause?.message;
  return detail && !error.message.includes(detail) ? `${error.message} (${detail})` : error.message;
}
