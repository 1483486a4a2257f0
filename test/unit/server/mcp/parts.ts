/** What the MCP module's parts are built with in process: secrets in memory, and connections that never reach the network. */
import pino from 'pino';
import type { Tool } from '@modelcontextprotocol/client';
import { type ConnectionDeps, McpConnection, type OfferedTool } from '../../../../src/server/mcp/connection.ts';
import type { McpServerSettings } from '../../../../src/shared/config/types.ts';
import type { SecretStore } from '../../../../src/shared/secrets/secret-store.ts';

export const silent = pino({ level: 'silent' });

/** A secret store in memory. */
export const memorySecrets = (): SecretStore & { values: Map<string, string> } => {
  const values = new Map<string, string>();
  return {
    backend: 'file', location: 'memory', values,
    get: async (name) => values.get(name),
    set: async (name, value) => void values.set(name, value),
    delete: async (name) => values.delete(name),
    list: async () => [...values.keys()],
    clear: async () => values.clear(),
  };
};

export const settings = (url = 'https://mcp.example.com/mcp', more: Partial<McpServerSettings> = {}): McpServerSettings => ({ url, enabled: true, headers: [], timeoutMs: 60_000, ...more });

export const tool = (name: string, more: Partial<Tool> = {}): Tool => ({ name, inputSchema: { type: 'object' }, ...more } as Tool);

/** A connection that counts what is asked of it instead of connecting. */
export class RecordingConnection extends McpConnection {
  connects = 0;
  stops = 0;
  calls: { offered: OfferedTool; args: Record<string, unknown> }[] = [];
  readonly made: ConnectionDeps;

  constructor(deps: ConnectionDeps) {
    super(deps);
    this.made = deps;
  }

  override connect(): Promise<void> {
    this.connects++;
    return Promise.resolve();
  }

  override async stop(): Promise<void> {
    this.stops++;
  }

  override async call(offered: OfferedTool, args: Record<string, unknown>): Promise<unknown> {
    this.calls.push({ offered, args });
    return { content: [{ type: 'text', text: `called ${offered.tool.name}` }] };
  }
}
