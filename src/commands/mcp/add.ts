import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
import { GatewayError, usageError } from '../../shared/errors.ts';
import { mcpUrlProblem } from '../../shared/mcp-url.ts';
import type { McpServerInfo } from '../../shared/protocol/results.ts';

export interface McpAddResult {
  profile: string;
  name: string;
  url: string;
  headers: string[];
  /** The server as the running daemon sees it, once it tried to connect; null when no daemon runs. */
  server: McpServerInfo | null;
}

const NAME = /^[a-z0-9][a-z0-9_-]{0,31}$/;
const HEADER = /^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$/;
/** A server address the gateway will talk to (see mcpUrlProblem), normalised. */
export function checkServerUrl(raw: string): string {
  const problem = mcpUrlProblem(raw);
  if (problem) throw usageError(`${problem.charAt(0).toUpperCase()}${problem.slice(1)}.`);
  return new URL(raw).toString();
}

export default class McpAdd extends BaseCommand<McpAddResult> {
  static override summary = 'Add an MCP server (streamable HTTP): its tools become the gateway\'s, as mcp.<name>.<tool>.';
  static override description = 'A server that uses OAuth then needs `gateway mcp login <name>`. A static key goes in a header: '
    + '--header X-Api-Key reads the value from stdin (--header "X-Api-Key: value" takes it inline) and keeps it in the secret store (mcp.servers.<name>.header.<Header>), never in config.json. '
    + 'Its tools reach HTTP callers and agents only once gateway.tools.allow names them (for example mcp.<name>.*).';
  static override examples = [
    '<%= config.bin %> mcp add docs https://mcp.example.com/mcp',
    'printf %s "$KEY" | <%= config.bin %> mcp add search https://search.example.com/mcp --header X-Api-Key',
    '<%= config.bin %> mcp add local http://127.0.0.1:3000/mcp --client-id gateway',
  ];
  static override args = {
    name: Args.string({ description: 'a name for the server: lower-case letters, digits, - and _', required: true }),
    url: Args.string({ description: 'the server\'s streamable HTTP address', required: true }),
  };
  static override flags = {
    header: Flags.string({ description: 'a static header sent with every request: "Name: value", or Name alone to read the value from stdin (kept out of the process list); the value goes to the secret store', multiple: true }),
    'client-id': Flags.string({ description: 'an OAuth client id registered for the gateway in advance (else the gateway registers itself)' }),
    'client-metadata-url': Flags.string({ description: 'HTTPS address of a Client ID Metadata Document describing the gateway' }),
    scope: Flags.string({ description: 'OAuth scopes to ask for (default: what the server advertises)' }),
  };

  async run(): Promise<McpAddResult> {
    const { args, flags } = await this.parse(McpAdd);
    if (!NAME.test(args.name)) throw usageError(`MCP server names are 1-32 lower-case letters, digits, - and _ (got ${JSON.stringify(args.name)}).`);
    const url = checkServerUrl(args.url);
    const headers = new Map<string, string>();
    let fromStdin: string | undefined;
    for (const header of flags.header ?? []) {
      const colon = header.indexOf(':');
      const name = (colon > 0 ? header.slice(0, colon) : header).trim();
      if (!HEADER.test(name)) throw usageError('--header takes "Name: value", or a header name alone to read its value from stdin.');
      if (colon < 0) {
        // The value from stdin (or a hidden prompt), out of the process list and the shell's history.
        if (fromStdin) throw usageError(`Only one header value can come from stdin (${fromStdin} already does).`);
        fromStdin = name;
        const { readSecretValue } = await import('../../cli/secret-input.ts');
        headers.set(name, await readSecretValue(`mcp.servers.${args.name}.header.${name}`));
        continue;
      }
      const value = header.slice(colon + 1).trim();
      if (!value) throw usageError(`--header ${name}: the value is empty.`);
      headers.set(name, value);
    }
    for (const [name, value] of headers) if (/[\r\n\0]/.test(value)) throw usageError(`--header ${name}: the value has a line break or NUL.`);
    if (flags['client-metadata-url'] && !flags['client-metadata-url'].startsWith('https://')) throw usageError('--client-metadata-url must be an https address.');

    const profile = this.selectProfile(flags.profile);
    const [{ ensureProfile }, { openSecretStore }, { loadConfig }, { applyConfigChange }, { inspectDaemon }] = await Promise.all([
      import('../../shared/profile-setup.ts'),
      import('../../shared/secrets/secret-store.ts'),
      import('../../shared/config/profile-config.ts'),
      import('../../cli/config-access.ts'),
      import('../../shared/daemon-lock.ts'),
    ]);
    const setup = await ensureProfile(profile.paths);
    if (setup.warning) this.warning(setup.warning);
    if (loadConfig(profile.paths).effective.mcp.servers[args.name]) {
      throw new GatewayError(`MCP server ${args.name} exists already.`, { kind: 'conflict', hints: [`gateway mcp remove ${args.name}   # then add it again`] });
    }
    // The secrets first: a running daemon connects as soon as the configuration names the server.
    const store = openSecretStore(profile.paths, setup.backend);
    for (const [name, value] of headers) await store.set(`mcp.servers.${args.name}.header.${name}`, value);
    const settings = {
      url,
      ...(headers.size ? { headers: [...headers.keys()] } : {}),
      ...(flags['client-id'] ? { clientId: flags['client-id'] } : {}),
      ...(flags['client-metadata-url'] ? { clientMetadataUrl: flags['client-metadata-url'] } : {}),
      ...(flags.scope ? { scope: flags.scope } : {}),
    };
    await applyConfigChange(profile.paths, `mcp.servers.${args.name}`, settings);

    let server: McpServerInfo | null = null;
    if (inspectDaemon(profile.paths).state === 'running') server = await this.settled(profile, args.name);
    if (!server) this.say(`Added MCP server ${args.name} (${url}); the daemon connects to it when it starts.`);
    else if (server.state === 'connected') this.say(`Added MCP server ${args.name}: connected, ${server.tools} tool${server.tools === 1 ? '' : 's'} (gateway mcp tools ${args.name}).`);
    else if (server.state === 'needs-login') this.say(`Added MCP server ${args.name}. It needs a login: gateway mcp login ${args.name}`);
    else this.say(`Added MCP server ${args.name}: ${server.state}${server.reason ? ` (${server.reason})` : ''}.`);
    if (server?.state === 'connected' || server?.state === 'needs-login') {
      this.note(`Its tools reach HTTP callers and agents once allowed: gateway config set gateway.tools.allow '["mcp.${args.name}.*"]'`);
    }
    return { profile: profile.name, name: args.name, url, headers: [...headers.keys()], server };
  }

  /** The server once the daemon's first attempt settled (up to 15 s). */
  private async settled(profile: ReturnType<McpAdd['selectProfile']>, name: string): Promise<McpServerInfo | null> {
    const client = await this.rpc(profile);
    const deadline = Date.now() + 15_000;
    for (;;) {
      const { servers } = await client.call('mcp.list');
      const server = servers.find((s) => s.name === name) ?? null;
      if ((server && server.state !== 'connecting') || Date.now() > deadline) return server;
      await new Promise((resolve) => setTimeout(resolve, 150));
    }
  }
}
