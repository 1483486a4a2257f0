import { Args } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';

export default class PairRevoke extends BaseCommand<Record<string, unknown>> {
  static override summary = 'Remove an approved sender from a channel\'s allow-list.';
  static override examples = ['<%= config.bin %> pair revoke irc alice'];
  static override args = {
    channel: Args.string({ description: 'channel, such as irc', required: true }),
    sender: Args.string({ description: 'sender id or name (for IRC the nick, any case)', required: true }),
  };
  static override flags = { url: BaseCommand.urlFlag };

  async run(): Promise<Record<string, unknown>> {
    const { args, flags } = await this.parse(PairRevoke);
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const result = await client.call('pair.revoke', { channel: args.channel, sender: args.sender });
    this.say(`Revoked ${result.sender} on ${result.channel}: their direct messages are treated as a stranger's again.`);
    return result;
  }
}
