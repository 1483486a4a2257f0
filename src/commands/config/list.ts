import { Flags } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
import { GatewayError } from '../../shared/errors.ts';
import type { GatewayConfig } from '../../shared/config/types.ts';

export interface ListResult {
  profile: string;
  file: string;
  /** Every setting with defaults filled in. */
  config: GatewayConfig;
  /** Only what config.json holds. */
  set: Record<string, unknown>;
}

function flatten(value: unknown, prefix: string, out: [string, unknown][]): [string, unknown][] {
  if (value !== null && typeof value === 'object' && !Array.isArray(value) && Object.keys(value).length > 0) {
    for (const [key, child] of Object.entries(value)) flatten(child, prefix ? `${prefix}.${key}` : key, out);
  } else if (prefix) {
    // (An empty object at the top is nothing set, not a setting named "".)
    out.push([prefix, value]);
  }
  return out;
}

export default class ConfigList extends BaseCommand<ListResult> {
  static override summary = 'List every setting with its value; "(default)" marks values not set in config.json.';
  static override examples = ['<%= config.bin %> config list', '<%= config.bin %> config list --set-only', '<%= config.bin %> config list --json'];
  static override flags = {
    'set-only': Flags.boolean({ description: 'only the settings config.json holds' }),
    url: BaseCommand.urlFlag,
  };

  async run(): Promise<ListResult> {
    const { flags } = await this.parse(ConfigList);
    const [{ loadConfig }, { getPath }] = await Promise.all([
      import('../../shared/config/profile-config.ts'),
      import('../../shared/config/keys.ts'),
    ]);
    let raw: Record<string, unknown>;
    let effective: GatewayConfig;
    let profile: { name: string; file: string };
    if (flags.url) {
      const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
      const remote = await client.call('config.get');
      if (!('config' in remote)) throw new GatewayError(`The gateway at ${flags.url} did not answer with its configuration.`);
      ({ config: effective, set: raw } = remote);
      const status = await client.call('status');
      profile = { name: status.profile, file: flags.url };
    } else {
      const local = this.existingProfile(flags.profile);
      ({ raw, effective } = loadConfig(local.paths));
      // The port a profile listens on when none is set is derived from its name: listed like any default.
      const { derivedPort } = await import('../../shared/profile.ts');
      effective = { ...effective, gateway: { ...effective.gateway, port: effective.gateway.port ?? derivedPort(local.name) } };
      profile = { name: local.name, file: local.paths.config };
    }
    const rows = flatten(flags['set-only'] ? raw : effective, '', []);
    for (const [key, value] of rows) {
      const isDefault = getPath(raw, key) === undefined;
      this.say(`${key} = ${JSON.stringify(value)}${isDefault ? ' (default)' : ''}`);
    }
    if (rows.length === 0) this.say(`Nothing is set in ${profile.file}: every setting has its default (gateway config list shows them).`);
    return { profile: profile.name, file: profile.file, config: effective, set: raw };
  }
}
