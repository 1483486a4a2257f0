import { Flags } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
import { scopeList } from '../../cli/scope-list.ts';
import type { MethodResults } from '../../shared/protocol/results.ts';
import { OPERATOR_SCOPES, ROLES } from '../../shared/protocol/scopes.ts';

export type InviteResult = MethodResults['devices.invite'];

export default class DevicesInvite extends BaseCommand<InviteResult> {
  static override summary = 'Make a one-time join code that lets one remote device pair without a second trip to this host.';
  static override examples = [
    '<%= config.bin %> devices invite --scope operator.read --scope operator.write --ttl 10m --json',
    'then, on the other machine: gateway devices join <code> --url ws://gateway-host:18789',
  ];
  static override flags = {
    url: BaseCommand.urlFlag,
    role: Flags.option({ description: 'role the device gets', options: ROLES, default: 'operator' as const })(),
    scope: Flags.string({
      description: `scopes the invited device may hold: repeat the flag or give a comma-separated list (${OPERATOR_SCOPES.join(', ')})`,
      multiple: true, aliases: ['scopes'], default: ['operator.read'],
    }),
    ttl: Flags.string({ description: 'how long the code is valid (90s, 10m, 2h, 7d)', default: '10m' }),
  };

  async run(): Promise<InviteResult> {
    const { flags } = await this.parse(DevicesInvite);
    const { parseDuration } = await import('../../cli/duration.ts');
    const ttlMs = parseDuration(flags.ttl, '--ttl');
    const scopes = scopeList(flags.scope, OPERATOR_SCOPES);
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const result = await client.call('devices.invite', { role: flags.role, scopes, ttlMs });
    this.say(`Join code: ${result.code} (valid once, until ${result.expiresAt})`);
    return result;
  }
}
