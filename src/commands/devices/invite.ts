import { Flags } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
import { usageError } from '../../shared/errors.ts';
import type { MethodResults } from '../../shared/protocol/results.ts';
import { isOperatorScope, OPERATOR_SCOPES, ROLES } from '../../shared/protocol/scopes.ts';

export type InviteResult = MethodResults['devices.invite'];

export default class DevicesInvite extends BaseCommand<InviteResult> {
  static override summary = 'Make a one-time join code that lets one remote device pair without a second trip to this host.';
  static override examples = [
    '<%= config.bin %> devices invite --scopes operator.read,operator.write --ttl 10m --json',
    'then, on the other machine: gateway devices join <code> --url ws://gateway-host:18789',
  ];
  static override flags = {
    url: BaseCommand.urlFlag,
    role: Flags.option({ description: 'role the device gets', options: ROLES, default: 'operator' as const })(),
    scopes: Flags.string({ description: `comma-separated scopes (${OPERATOR_SCOPES.join(', ')})`, default: 'operator.read' }),
    ttl: Flags.string({ description: 'how long the code is valid (90s, 10m, 2h, 7d)', default: '10m' }),
  };

  async run(): Promise<InviteResult> {
    const { flags } = await this.parse(DevicesInvite);
    const { parseDuration } = await import('../../cli/duration.ts');
    const ttlMs = parseDuration(flags.ttl, '--ttl');
    const scopes = flags.scopes.split(',').map((scope) => scope.trim()).filter(Boolean);
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const unknown = scopes.filter((scope) => !isOperatorScope(scope));
    if (unknown.length > 0) throw usageError(`--scopes: unknown scope${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')}; known: ${OPERATOR_SCOPES.join(', ')}.`);
    const result = await client.call('devices.invite', { role: flags.role, scopes: scopes.filter(isOperatorScope), ttlMs });
    this.say(`Join code: ${result.code} (valid once, until ${result.expiresAt})`);
    return result;
  }
}
