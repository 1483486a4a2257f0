import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
import { usageError } from '../../shared/errors.ts';

export default class DevicesApprove extends BaseCommand<unknown> {
  static override summary = 'Approve a pending device pairing request.';
  static override examples = ['<%= config.bin %> devices approve K7QM2TXP', '<%= config.bin %> devices approve --latest'];
  static override args = { requestId: Args.string({ description: 'request id from `devices list --pending`' }) };
  static override flags = {
    url: BaseCommand.urlFlag,
    latest: Flags.boolean({ description: 'approve the newest pending request' }),
  };

  async run(): Promise<unknown> {
    const { args, flags } = await this.parse(DevicesApprove);
    if (!args.requestId && !flags.latest) throw usageError('Name the request to approve, or pass --latest.', ['gateway devices list --pending']);
    if (args.requestId && flags.latest) throw usageError('Pass a request id or --latest, not both.');
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const result = await client.call(
      'devices.approve', flags.latest ? { latest: true } : { requestId: args.requestId },
    );
    this.say(`Approved request ${result.requestId}: device ${result.device.id} (${result.device.role}: ${result.device.scopes.join(', ')}).`);
    return result;
  }
}
