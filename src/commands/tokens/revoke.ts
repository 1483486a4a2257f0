import { Args } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';

export default class TokensRevoke extends BaseCommand<{ id: string; revokedAt: string }> {
  static override summary = 'Revoke a product access token at once.';
  static override examples = ['<%= config.bin %> tokens revoke tok_3kq8ZtXbP1w2'];
  static override args = { id: Args.string({ description: 'token id from `tokens list`', required: true }) };
  static override flags = { url: BaseCommand.urlFlag };

  async run(): Promise<{ id: string; revokedAt: string }> {
    const { args, flags } = await this.parse(TokensRevoke);
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const result = await client.call<{ id: string; revokedAt: string }>('tokens.revoke', { id: args.id });
    this.say(`Revoked token ${result.id}.`);
    return result;
  }
}
