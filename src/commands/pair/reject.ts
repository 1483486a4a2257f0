import { Args } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
import type { MethodResults } from '../../shared/protocol/results.ts';

export default class PairReject extends BaseCommand<MethodResults['pair.reject']> {
  static override summary = 'Reject a direct-message pairing code; its sender is not answered again while the code would have been valid.';
  static override examples = ['<%= config.bin %> pair reject irc K7QM2TXP'];
  static override args = {
    channel: Args.string({ description: 'channel the code was sent on', required: true }),
    code: Args.string({ description: 'the pairing code', required: true }),
  };
  static override flags = { url: BaseCommand.urlFlag };

  async run(): Promise<MethodResults['pair.reject']> {
    const { args, flags } = await this.parse(PairReject);
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const result = await client.call('pair.reject', { channel: args.channel, code: args.code });
    this.say(`Rejected code ${result.code} from ${result.senderName ?? result.sender} on ${result.channel}.`);
    return result;
  }
}
