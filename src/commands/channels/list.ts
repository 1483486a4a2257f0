import { BaseCommand } from '../../cli/base-command.ts';
import { table } from '../../cli/table.ts';

export interface ChannelsList {
  channels: { channel: string; label: string; installed: boolean; enabled: boolean; running: boolean; dmPolicy: string; allowFrom: string[]; approvedSenders: number; accounts: string[] }[];
}

export default class ChannelsList_ extends BaseCommand<ChannelsList> {
  static override summary = 'List the channels this gateway knows, their DM policy and accounts.';
  static override examples = ['<%= config.bin %> channels list', '<%= config.bin %> channels list --json'];
  static override flags = { url: BaseCommand.urlFlag };

  async run(): Promise<ChannelsList> {
    const { flags } = await this.parse(ChannelsList_);
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const result = await client.call('channels.list');
    this.say(table(['CHANNEL', 'KIND', 'ENABLED', 'RUNNING', 'DM POLICY', 'APPROVED', 'ACCOUNTS'], result.channels.map((c) => [
      c.channel, c.label, c.enabled ? 'yes' : 'no', c.running ? 'yes' : 'no', c.dmPolicy,
      String(c.approvedSenders + c.allowFrom.length), c.accounts.join(',') || '-',
    ])));
    return result;
  }
}
