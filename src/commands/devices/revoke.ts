import { Args } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';

export default class DevicesRevoke extends BaseCommand<unknown> {
  static override summary = 'Revoke a paired device: its token stops working and its open connections close at once.';
  static override examples = ['<%= config.bin %> devices revoke <deviceId>'];
  static override flags = { url: BaseCommand.urlFlag };
  static override args = { deviceId: Args.string({ description: 'device id from `devices list`', required: true }) };

  async run(): Promise<unknown> {
    const { args, flags } = await this.parse(DevicesRevoke);
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const result = await client.call('devices.revoke', { deviceId: args.deviceId });
    this.say(`Revoked device ${result.deviceId} (${result.closedConnections} connection(s) closed).`);
    return result;
  }
}
