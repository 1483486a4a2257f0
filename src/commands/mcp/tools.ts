import { Args } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
import { table } from '../../cli/table.ts';
import type { MethodResult } from '../../shared/protocol/results.ts';

export default class McpTools extends BaseCommand<MethodResult<'mcp.tools'>> {
  static override summary = 'List the tools of an MCP server as the gateway offers them, and whether HTTP callers and agents may call them.';
  static override examples = ['<%= config.bin %> mcp tools docs', '<%= config.bin %> mcp tools docs --json'];
  static override args = { name: Args.string({ description: 'the MCP server', required: true }) };
  static override flags = { url: BaseCommand.urlFlag };

  async run(): Promise<MethodResult<'mcp.tools'>> {
    const { args, flags } = await this.parse(McpTools);
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const result = await client.call('mcp.tools', { name: args.name });
    if (result.server.state !== 'connected') this.note(`MCP server ${args.name} is ${result.server.state}${result.server.reason ? ` (${result.server.reason})` : ''}; these are its tools as last seen.`);
    this.say(table(['TOOL', 'HTTP', 'DESCRIPTION'], result.tools.map((t) => [t.name, t.overHttp ? 'yes' : 'no (gateway.tools.allow)', t.description.split('\n')[0]!.slice(0, 100)])));
    return result;
  }
}
