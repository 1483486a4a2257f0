import { Args } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
import { table } from '../../cli/table.ts';

export interface PairAllowed {
  senders: { channel: string; sender: string; senderName: string | null; account: string | null; addedAt: string; addedBy: string; code: string | null }[];
}

export default class PairAllowed_ extends BaseCommand<PairAllowed> {
  static override summary = 'List the senders approved by pairing (config allowFrom entries are in `config get channels.<id>.allowFrom`).';
  static override examples = ['<%= config.bin %> pair allowed', '<%= config.bin %> pair allowed irc --json'];
  static override args = { channel: Args.string({ description: 'only this channel' }) };
  static override flags = { url: BaseCommand.urlFlag };

  async run(): Promise<PairAllowed> {
    const { args, flags } = await this.parse(PairAllowed_);
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const result = await client.call('pair.allowed', args.channel ? { channel: args.channel } : {});
    this.say(result.senders.length === 0 ? 'No senders are approved by pairing.'
      : table(['CHANNEL', 'SENDER', 'NAME', 'APPROVED', 'CODE'], result.senders.map((s) => [s.channel, s.sender, s.senderName ?? '-', s.addedAt, s.code ?? '-'])));
    return result;
  }
}
