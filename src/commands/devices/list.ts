import { Flags } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
import { table } from '../../cli/table.ts';
import type { MethodResults } from '../../shared/protocol/results.ts';

export type DevicesList = MethodResults['devices.list'];

export default class DevicesList_ extends BaseCommand<DevicesList> {
  static override summary = 'List paired devices and pending pairing requests.';
  static override examples = ['<%= config.bin %> devices list', '<%= config.bin %> devices list --pending --json'];
  static override flags = {
    url: BaseCommand.urlFlag,
    pending: Flags.boolean({ description: 'only pending pairing requests' }),
  };

  async run(): Promise<DevicesList> {
    const { flags } = await this.parse(DevicesList_);
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const result = await client.call('devices.list');
    if (flags.pending) result.paired = [];
    if (result.pending.length > 0 || flags.pending) {
      this.say('Pending pairing requests (approve with: gateway devices approve <request>):');
      this.say(result.pending.length ? table(['REQUEST', 'DEVICE', 'ROLE', 'SCOPES', 'FROM', 'EXPIRES'], result.pending.map((r) => [
        r.requestId, r.deviceId.slice(0, 12), r.role, r.scopes.join(','), `${r.address ?? '-'}${r.viaProxy ? ' (proxied)' : ''}`, r.expiresAt ?? '-',
      ])) : '  none');
    }
    if (!flags.pending) {
      this.say('Paired devices:');
      this.say(result.paired.length ? table(['DEVICE', 'ROLE', 'SCOPES', 'CLIENT', 'LAST SEEN', 'FROM'], result.paired.map((d) => [
        d.id, d.role, d.scopes.join(','), d.clientId ?? '-', d.lastSeenAt ?? '-', d.lastAddress ?? '-',
      ])) : '  none');
    }
    return result;
  }
}
