import { Args } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
import { GatewayError } from '../../shared/errors.ts';

export interface McpRemoveResult {
  profile: string;
  name: string;
  /** Secrets of the server deleted from the store (names only). */
  secretsDeleted: string[];
}

export default class McpRemove extends BaseCommand<McpRemoveResult> {
  static override summary = 'Remove an MCP server: its tools go, and its tokens and header values leave the secret store.';
  static override examples = ['<%= config.bin %> mcp remove docs'];
  static override args = { name: Args.string({ description: 'the MCP server', required: true }) };

  async run(): Promise<McpRemoveResult> {
    const { args, flags } = await this.parse(McpRemove);
    const profile = this.existingProfile(flags.profile);
    const [{ loadConfig }, { applyConfigChange }, { profileSecretStore }] = await Promise.all([
      import('../../shared/config/profile-config.ts'),
      import('../../cli/config-access.ts'),
      import('../../shared/profile-setup.ts'),
    ]);
    if (!loadConfig(profile.paths).effective.mcp.servers[args.name]) {
      throw new GatewayError(`No MCP server ${JSON.stringify(args.name)} in profile "${profile.name}".`, { kind: 'not_found', hints: ['gateway mcp list'] });
    }
    await applyConfigChange(profile.paths, `mcp.servers.${args.name}`, undefined);
    const store = profileSecretStore(profile.paths);
    const prefix = `mcp.servers.${args.name}.`;
    const secretsDeleted: string[] = [];
    if (store) {
      for (const name of await store.list()) {
        if (name.startsWith(prefix) && (await store.delete(name))) secretsDeleted.push(name);
      }
    }
    this.say(`Removed MCP server ${args.name}${secretsDeleted.length ? ` and its ${secretsDeleted.length} secret${secretsDeleted.length === 1 ? '' : 's'}` : ''}.`);
    return { profile: profile.name, name: args.name, secretsDeleted };
  }
}
