import { BaseCommand } from '../../cli/base-command.ts';
import { table } from '../../cli/table.ts';

export interface TokenList {
  tokens: { id: string; name: string; scopes: string[]; createdAt: string; expiresAt: string; lastUsedAt: string | null; revokedAt: string | null; masked: string }[];
}

export default class TokensList extends BaseCommand<TokenList> {
  static override summary = 'List product access tokens, masked (prefix and last four characters).';
  static override examples = ['<%= config.bin %> tokens list --json'];
  static override flags = { url: BaseCommand.urlFlag };

  async run(): Promise<TokenList> {
    const { flags } = await this.parse(TokensList);
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const result = await client.call('tokens.list');
    this.say(result.tokens.length ? table(['ID', 'NAME', 'TOKEN', 'SCOPES', 'EXPIRES', 'LAST USED', 'STATE'], result.tokens.map((t) => [
      t.id, t.name, t.masked, t.scopes.join(','), t.expiresAt, t.lastUsedAt ?? '-', t.revokedAt ? 'revoked' : Date.parse(t.expiresAt) <= Date.now() ? 'expired' : 'active',
    ])) : 'No tokens.');
    return result;
  }
}
