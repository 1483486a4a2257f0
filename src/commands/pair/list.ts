import { Args } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
import { table } from '../../cli/table.ts';
import type { MethodResults } from '../../shared/protocol/results.ts';

export type PairList = MethodResults['pair.list'];

export default class PairList_ extends BaseCommand<PairList> {
  static override summary = 'List pending direct-message pairing codes.';
  static override examples = ['<%= config.bin %> pair list', '<%= config.bin %> pair list irc --json'];
  static override args = { channel: Args.string({ description: 'only this channel' }) };
  static override flags = { url: BaseCommand.urlFlag };

  async run(): Promise<PairList> {
    const { args, flags } = await this.parse(PairList_);
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const result = await client.call('pair.list', args.channel ? { channel: args.channel } : {});
    if (result.requests.length === 0) {
      this.say('No pairing codes are pending.');
    } else {
      this.say(table(['CHANNEL', 'ACCOUNT', 'CODE', 'SENDER', 'EXPIRES'], result.requests.map((r) => [r.channel, r.account, r.code, r.senderName ?? r.sender, r.expiresAt ?? '-'])));
      this.say(`\nApprove with: gateway pair approve <channel> <code>`);
    }
    return result;
  }
}
