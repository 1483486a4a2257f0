import { Flags } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
import { table } from '../../cli/table.ts';

export interface TokenList {
  tokens: { id: string; name: string; scopes: string[]; createdAt: string; expiresAt: string; lastUsedAt: string | null; revokedAt: string | null; parentId: string | null; masked: string }[];
  more: boolean;
}

export default class TokensList extends BaseCommand<TokenList> {
  static override summary = 'List product access tokens, masked (prefix and last four characters): those in force first, then revoked and expired ones until retention.';
  static override examples = ['<%= config.bin %> tokens list --json', '<%= config.bin %> tokens list --limit 1000'];
  static override flags = {
    url: BaseCommand.urlFlag,
    limit: Flags.integer({ description: 'at most this many (1-1000)', default: 100, min: 1, max: 1000 }),
  };

  async run(): Promise<TokenList> {
    const { flags } = await this.parse(TokensList);
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const result = await client.call('tokens.list', { limit: flags.limit });
    this.say(result.tokens.length ? table(['ID', 'NAME', 'TOKEN', 'SCOPES', 'EXPIRES', 'LAST USED', 'STATE'], result.tokens.map((t) => [
      t.id, t.name, t.masked, t.scopes.join(','), t.expiresAt, t.lastUsedAt ?? '-', t.revokedAt ? 'revoked' : Date.parse(t.expiresAt) <= Date.now() ? 'expired' : 'active',
    ])) : 'No tokens.');
    if (result.more) this.say(`More tokens are kept than these ${result.tokens.length}: gateway tokens list --limit ${Math.min(1000, flags.limit * 10)}`);
    return result;
  }
}
