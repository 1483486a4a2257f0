import { BaseCommand } from '../../cli/base-command.ts';
import { table } from '../../cli/table.ts';

interface ToolsList {
  tools: { name: string; description: string; inputSchema: Record<string, unknown>; dangerous: boolean; plugin: string; overHttp: boolean }[];
}

export default class ToolsList_ extends BaseCommand<ToolsList> {
  static override summary = 'List the tools operators can invoke, and which of them HTTP callers can.';
  static override examples = ['<%= config.bin %> tools list', '<%= config.bin %> tools list --json'];
  static override flags = { url: BaseCommand.urlFlag };

  async run(): Promise<ToolsList> {
    const { flags } = await this.parse(ToolsList_);
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const result = await client.call('tools.catalog');
    this.say(table(['TOOL', 'PLUGIN', 'HTTP', 'DESCRIPTION'], result.tools.map((t) => [
      t.name, t.plugin, t.overHttp ? 'yes' : t.dangerous ? 'no (dangerous)' : 'no', t.description,
    ])));
    return result;
  }
}
