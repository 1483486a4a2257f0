import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';

export interface PairApproved {
  approved: true;
  alreadyApproved: boolean;
  channel: string;
  account: string;
  code: string;
  sender: string;
  senderName: string | null;
  notified: boolean;
  notifyError?: string;
}

export default class PairApprove extends BaseCommand<PairApproved> {
  static override summary = 'Approve a direct-message pairing code: its sender may then talk to the gateway.';
  static override description = 'The sender joins the channel\'s allow-list, which survives restarts. Codes match case-insensitively. '
    + 'An unknown, expired or rejected code exits 5; approving a code twice exits 0 and says so.';
  static override examples = ['<%= config.bin %> pair approve irc K7QM2TXP', '<%= config.bin %> pair approve irc k7qm2txp --notify --json'];
  static override args = {
    channel: Args.string({ description: 'channel the code was sent on, such as irc', required: true }),
    code: Args.string({ description: 'the 8-character code the sender received', required: true }),
  };
  static override flags = {
    url: BaseCommand.urlFlag,
    notify: Flags.boolean({ description: 'tell the sender they were approved' }),
  };

  async run(): Promise<PairApproved> {
    const { args, flags } = await this.parse(PairApprove);
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const result = await client.call('pair.approve', { channel: args.channel, code: args.code, notify: flags.notify });
    const who = result.senderName ?? result.sender;
    if (result.alreadyApproved) {
      this.say(`Code ${result.code} was already approved: ${who} on ${result.channel} may talk to the gateway.`);
    } else {
      this.say(`Approved ${who} on ${result.channel} (account ${result.account}); their messages now reach a session.`);
      if (flags.notify && result.notified) this.say(`${who} was told.`);
    }
    if (flags.notify && !result.notified && !result.alreadyApproved) this.warning(`${who} could not be told: ${result.notifyError ?? 'the channel is not connected'}.`);
    return result;
  }
}
