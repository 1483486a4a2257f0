/**
 * The MCP servers the gateway keeps connections to: one entry per server of
 * `mcp.servers` (its connection, its credentials, its settings), kept in line
 * with the configuration, and their tools offered to the tool registry as
 * mcp.<server>.<tool>.
 */
import type { Logger } from 'pino';
import type { McpServerSettings } from '../../shared/config/types.ts';
import type { McpServerInfo } from '../../shared/protocol/results.ts';
import type { SecretStore } from '../../shared/secrets/secret-store.ts';
import { DomainError } from '../kernel/errors.ts';
import type { ToolDef } from '../kernel/module.ts';
import { type ConnectionDeps, McpConnection, type OfferedTool } from './connection.ts';
import { McpCredentials } from './credentials.ts';
import type { FlowStore } from './oauth.ts';

/** One configured server. */
export interface McpServerEntry {
  connection: McpConnection;
  credentials: McpCredentials;
  settings: McpServerSettings;
}

export interface McpServersDeps {
  flows: FlowStore;
  secrets: SecretStore;
  log: Logger;
  /** The name the gateway gives itself to servers and authorization servers. */
  clientName: string;
  version: string;
  /** Where an authorization server sends the browser back to. */
  callbackUrl: () => string;
  /** Told whenever a server's state changes (and when it is removed). */
  onChange: (info: McpServerInfo) => void;
  /** Told when a server refuses the login the gateway held. */
  onLoginLost: (server: string, reason: string) => void;
  /** Makes a server's connection (tests give one that does not reach the network). */
  connection?: (deps: ConnectionDeps) => McpConnection;
}

export class McpServers {
  private readonly entries = new Map<string, McpServerEntry>();
  private readonly deps: McpServersDeps;
  /** Once the daemon is ready: new and changed servers connect at once. */
  private started = false;
  /** One definition per tool as the server listed it: its schema object is what the validator's cache is keyed by. */
  private readonly defs = new WeakMap<OfferedTool, ToolDef>();

  constructor(deps: McpServersDeps) {
    this.deps = deps;
  }

  private async add(name: string, settings: McpServerSettings): Promise<McpServerEntry> {
    const { deps } = this;
    const credentials = new McpCredentials(deps.secrets, name);
    const connectionDeps: ConnectionDeps = {
      name,
      settings: () => entry.settings,
      credentials,
      redirectUrl: deps.callbackUrl,
      clientName: deps.clientName,
      version: deps.version,
      logger: deps.log,
      savedTools: await deps.flows.savedTools(name),
      saveTools: (tools) => void deps.flows.saveTools(name, tools).catch((error: unknown) => deps.log.warn({ server: name, err: error }, 'the MCP server\'s tools could not be kept')),
      onChange: deps.onChange,
      onLoginLost: (reason) => deps.onLoginLost(name, reason),
    };
    const entry: McpServerEntry = { credentials, settings, connection: (deps.connection ?? ((made) => new McpConnection(made)))(connectionDeps) };
    this.entries.set(name, entry);
    return entry;
  }

  /** Brings the connections in line with the configuration: new servers connect, removed ones stop, changed ones reconnect. */
  async sync(servers: Record<string, McpServerSettings>): Promise<void> {
    for (const [name, entry] of this.entries) {
      if (!servers[name]) {
        this.entries.delete(name);
        await this.deps.flows.forget(name);
        await entry.connection.stop();
        this.deps.onChange({ name, url: entry.settings.url, state: 'disabled', reason: 'removed', tools: 0, auth: 'none' });
      }
    }
    for (const [name, settings] of Object.entries(servers)) {
      const entry = this.entries.get(name);
      if (!entry) {
        const added = await this.add(name, settings);
        if (this.started) void added.connection.connect();
        continue;
      }
      if (JSON.stringify(entry.settings) === JSON.stringify(settings)) continue;
      const urlChanged = entry.settings.url !== settings.url;
      entry.settings = settings;
      // A login belongs to the server it was made with.
      if (urlChanged) await entry.credentials.forget('all');
      if (this.started) void entry.connection.connect();
    }
  }

  /** A configured server, or undefined. */
  get(name: string): McpServerEntry | undefined {
    return this.entries.get(name);
  }

  /** A configured server, or not_found naming how to add it. */
  find(name: string): McpServerEntry {
    const entry = this.entries.get(name);
    if (!entry) throw new DomainError('not_found', `No MCP server ${JSON.stringify(name)}; add it with gateway mcp add ${name} <url>.`);
    return entry;
  }

  list(): Promise<McpServerInfo[]> {
    return Promise.all([...this.entries.values()].map(({ connection }) => connection.info()));
  }

  /** A server's secrets changed (`gateway secrets set mcp.servers.<name>.…`): read them again and reconnect. */
  secretChanged(secret: string): void {
    const entry = this.entries.get(secret.split('.')[2] ?? '');
    if (!entry) return;
    entry.credentials.reset();
    void entry.connection.connect();
  }

  /** The daemon is ready: every server connects. */
  start(): void {
    this.started = true;
    for (const { connection } of this.entries.values()) void connection.connect();
  }

  async stop(): Promise<void> {
    this.started = false;
    await Promise.all([...this.entries.values()].map(({ connection }) => connection.stop()));
  }

  /** The servers' tools as a source of the tool registry. */
  toolSource(): { owner: string; tools(): Iterable<ToolDef>; get(name: string): ToolDef | undefined } {
    const servers = this;
    return {
      owner: 'mcp',
      *tools() {
        for (const { connection } of servers.entries.values()) {
          for (const offered of connection.tools()) yield servers.toolDef(connection, offered);
        }
      },
      get(name) {
        const [prefix, server] = name.split('.', 2);
        if (prefix !== 'mcp' || !server) return undefined;
        const connection = servers.entries.get(server)?.connection;
        const offered = connection?.tool(name);
        return connection && offered ? servers.toolDef(connection, offered) : undefined;
      },
    };
  }

  private toolDef(connection: McpConnection, offered: OfferedTool): ToolDef {
    let def = this.defs.get(offered);
    if (!def) {
      def = describeTool(connection, offered);
      this.defs.set(offered, def);
    }
    return def;
  }
}

/** An MCP tool as the registry offers it: dangerous (it runs elsewhere), so HTTP callers reach it only once gateway.tools.allow names it. */
export function describeTool(connection: Pick<McpConnection, 'name' | 'call'>, offered: OfferedTool): ToolDef {
  return {
    name: offered.name,
    description: offered.tool.description ?? offered.tool.title ?? `${offered.tool.name} of MCP server ${connection.name}`,
    inputSchema: withoutDialect(offered.tool.inputSchema as Record<string, unknown> | undefined),
    dangerous: true,
    external: `it runs on MCP server ${connection.name}`,
    handler: (args) => connection.call(offered, args),
  };
}

/** An input schema as the gateway's validator takes it: the server's $schema dialect marker left out. */
export function withoutDialect(schema: Record<string, unknown> | undefined): Record<string, unknown> {
  if (!schema || typeof schema !== 'object') return { type: 'object' };
  const { $schema: _dialect, ...rest } = schema;
  return rest;
}
