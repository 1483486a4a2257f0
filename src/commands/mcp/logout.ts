import { Args } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
import type { MethodResult } from '../../shared/protocol/results.ts';

export default class McpLogout extends BaseCommand<MethodResult<'mcp.logout'>> {
  static override summary = 'Forget an MCP server\'s login (its tokens leave the secret store) and disconnect it.';
  static override examples = ['<%= config.bin %> mcp logout docs'];
  static override args = { name: Args.string({ description: 'the MCP server', required: true }) };
  static override flags = { url: BaseCommand.urlFlag };

  async run(): Promise<MethodResult<'mcp.logout'>> {
    const { args, flags } = await this.parse(McpLogout);
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const result = await client.call('mcp.logout', { name: args.name });
    this.say(`Logged out of MCP server ${args.name}; its tools are unavailable until gateway mcp login ${args.name}.`);
    return result;
  }
}
