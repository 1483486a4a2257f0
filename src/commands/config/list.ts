import { Flags } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
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
  } else {
    out.push([prefix, value]);
  }
  return out;
}

export default class ConfigList extends BaseCommand<ListResult> {
  static override summary = 'List every setting with its value; "(default)" marks values not set in config.json.';
  static override examples = ['<%= config.bin %> config list', '<%= config.bin %> config list --set-only', '<%= config.bin %> config list --json'];
  static override flags = { 'set-only': Flags.boolean({ description: 'only the settings config.json holds' }) };

  async run(): Promise<ListResult> {
    const { flags } = await this.parse(ConfigList);
    const profile = this.existingProfile(flags.profile);
    const [{ loadConfig }, { getPath }] = await Promise.all([
      import('../../shared/config/profile-config.ts'),
      import('../../shared/config/keys.ts'),
    ]);
    const { raw, effective } = loadConfig(profile.paths);
    for (const [key, value] of flatten(flags['set-only'] ? raw : effective, '', [])) {
      const isDefault = getPath(raw, key) === undefined;
      this.say(`${key} = ${JSON.stringify(value)}${isDefault ? ' (default)' : ''}`);
    }
    return { profile: profile.name, file: profile.paths.config, config: effective, set: raw };
  }
}
