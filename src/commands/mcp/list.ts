import { BaseCommand } from '../../cli/base-command.ts';
import { table } from '../../cli/table.ts';
import type { McpServerInfo } from '../../shared/protocol/results.ts';

export default class McpList extends BaseCommand<{ servers: McpServerInfo[] }> {
  static override summary = 'List the MCP servers: state (connected, needs-login, error with the reason), tools and how the gateway signs in.';
  static override examples = ['<%= config.bin %> mcp list', '<%= config.bin %> mcp list --json'];
  static override flags = { url: BaseCommand.urlFlag };

  async run(): Promise<{ servers: McpServerInfo[] }> {
    const { flags } = await this.parse(McpList);
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const result = await client.call('mcp.list');
    if (result.servers.length === 0) this.say('No MCP servers. Add one: gateway mcp add <name> <url>');
    else {
      this.say(table(['NAME', 'STATE', 'TOOLS', 'AUTH', 'URL', 'REASON'], result.servers.map((s) => [
        s.name, s.state, String(s.tools), s.auth, s.url, s.reason ?? '',
      ])));
    }
    return result;
  }
}
