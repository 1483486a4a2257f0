/**
 * The MCP client library, imported the first time an MCP server is used:
 * a daemon without MCP servers, and every CLI command, never load it.
 */
export type McpSdk = typeof import('@modelcontextprotocol/client');

let loading: Promise<McpSdk> | undefined;

export const loadMcpSdk = (): Promise<McpSdk> => (loading ??= import('@modelcontextprotocol/client'));
