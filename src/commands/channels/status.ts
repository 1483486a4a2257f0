import { BaseCommand } from '../../cli/base-command.ts';
import { table } from '../../cli/table.ts';
import type { ChannelState } from '../../shared/channels.ts';

export interface ChannelsStatus {
  channels: { channel: string; account: string; state: ChannelState; detail?: string; since: string }[];
}

export default class ChannelsStatus_ extends BaseCommand<ChannelsStatus> {
  static override summary = 'Show the connection state of every channel account.';
  static override description = 'States: connected, connecting, disconnected, error.';
  static override examples = ['<%= config.bin %> channels status', '<%= config.bin %> channels status --json'];
  static override flags = { url: BaseCommand.urlFlag };

  async run(): Promise<ChannelsStatus> {
    const { flags } = await this.parse(ChannelsStatus_);
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const result = await client.call('channels.status');
    this.say(table(['CHANNEL', 'ACCOUNT', 'STATE', 'SINCE', 'DETAIL'], result.channels.map((c) => [c.channel, c.account, c.state, c.since, c.detail ?? ''])));
    return result;
  }
}
