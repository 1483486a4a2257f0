import { Args } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
import type { MethodResults } from '../../shared/protocol/results.ts';

export default class TokensRevoke extends BaseCommand<MethodResults['tokens.revoke']> {
  static override summary = 'Revoke a product access token at once, with every token made with it.';
  static override examples = ['<%= config.bin %> tokens revoke tok_3kq8ZtXbP1w2'];
  static override args = { id: Args.string({ description: 'token id from `tokens list`', required: true }) };
  static override flags = { url: BaseCommand.urlFlag };

  async run(): Promise<MethodResults['tokens.revoke']> {
    const { args, flags } = await this.parse(TokensRevoke);
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const result = await client.call('tokens.revoke', { id: args.id });
    const family = result.descendantsRevoked === 1 ? ' and 1 token made with it' : result.descendantsRevoked > 1 ? ` and ${result.descendantsRevoked} tokens made with it` : '';
    this.say(result.alreadyRevoked ? `Token ${result.id} was already revoked (at ${result.revokedAt}); nothing changed.` : `Revoked token ${result.id}${family}.`);
    return result;
  }
}
