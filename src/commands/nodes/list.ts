import { BaseCommand } from '../../cli/base-command.ts';
import { table } from '../../cli/table.ts';

export interface NodesList {
  nodes: { deviceId: string; clientId: string; platform: string; address: string; caps: string[]; commands: string[]; deniedCommands: string[]; connectedAt: string }[];
}

export default class NodesList_ extends BaseCommand<NodesList> {
  static override summary = 'List connected companion nodes with their capabilities and the commands they offer.';
  static override examples = ['<%= config.bin %> nodes list --json'];
  static override flags = { url: BaseCommand.urlFlag };

  async run(): Promise<NodesList> {
    const { flags } = await this.parse(NodesList_);
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const result = await client.call('nodes.list');
    this.say(result.nodes.length ? table(['NODE', 'DEVICE', 'FROM', 'CAPS', 'COMMANDS'], result.nodes.map((node) => [
      node.clientId, node.deviceId.slice(0, 12), node.address, node.caps.join(','), node.commands.join(','),
    ])) : 'No nodes are connected.');
    return result;
  }
}
