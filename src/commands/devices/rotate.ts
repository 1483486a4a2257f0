import { Args } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';

export default class DevicesRotate extends BaseCommand<unknown> {
  static override summary = 'Give a device a new token at once; the old one stops working. The new token is shown once.';
  static override description = 'A device that holds the gateway credential picks up a fresh token on its next connect; give the printed one to a device that only has its token.';
  static override examples = ['<%= config.bin %> devices rotate <deviceId> --json'];
  static override flags = { url: BaseCommand.urlFlag };
  static override args = { deviceId: Args.string({ description: 'device id', required: true }) };

  async run(): Promise<unknown> {
    const { args, flags } = await this.parse(DevicesRotate);
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const result = await client.call('devices.rotate', { deviceId: args.deviceId });
    this.say(`Rotated the token of device ${result.deviceId}; ${result.closedConnections} connection(s) closed. New token (shown once):`);
    this.say(result.deviceToken);
    return result;
  }
}
