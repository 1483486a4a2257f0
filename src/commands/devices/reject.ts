import { Args } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';

export default class DevicesReject extends BaseCommand<unknown> {
  static override summary = 'Reject a pending device pairing request.';
  static override examples = ['<%= config.bin %> devices reject K7QM2TXP'];
  static override flags = { url: BaseCommand.urlFlag };
  static override args = { requestId: Args.string({ description: 'request id', required: true }) };

  async run(): Promise<unknown> {
    const { args, flags } = await this.parse(DevicesReject);
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const result = await client.call('devices.reject', { requestId: args.requestId });
    this.say(`Rejected request ${result.requestId}.`);
    return result;
  }
}
