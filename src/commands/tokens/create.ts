import { Flags } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
import { scopeList } from '../../cli/scope-list.ts';
import { usageError } from '../../shared/errors.ts';
import type { TokenCreated } from '../../shared/protocol/results.ts';
import { TOKEN_SCOPES } from '../../shared/protocol/scopes.ts';

export interface CreatedToken extends TokenCreated {
  /** With --save: where the token was stored. */
  saved?: string;
}

export default class TokensCreate extends BaseCommand<CreatedToken> {
  static override summary = 'Create a product access token for the HTTP API; the token is shown once.';
  static override description = `Scopes: ${TOKEN_SCOPES.join(', ')}. Without --expires-in or --expires-at a token expires after api.tokens.defaultExpiryDays (90 days).`;
  static override examples = [
    '<%= config.bin %> tokens create --name ci --scope jobs:read --scope tokens:read --expires-in 30d',
    '<%= config.bin %> tokens create --name deploy --scope jobs:write --save --json',
    '<%= config.bin %> tokens create --name app --scope inference --budget-daily 5 --budget-monthly 50',
  ];
  static override flags = {
    name: Flags.string({ description: 'what the token is for', required: true }),
    scope: Flags.string({
      description: `scopes to grant: repeat the flag or give a comma-separated list (${TOKEN_SCOPES.join(', ')})`, required: true, multiple: true, aliases: ['scopes'],
    }),
    'expires-in': Flags.string({ description: 'lifetime such as 12h, 30d', exclusive: ['expires-at'] }),
    'expires-at': Flags.string({ description: 'expiry as an ISO 8601 time', exclusive: ['expires-in'] }),
    'budget-daily': Flags.string({ description: 'most the token (and tokens made with it) may spend on model calls in a day (UTC), in models.currency' }),
    'budget-monthly': Flags.string({ description: 'most the token (and tokens made with it) may spend on model calls in a calendar month (UTC), in models.currency' }),
    save: Flags.boolean({ description: 'also keep the token in this profile\'s secret store (the OS keychain where there is one)' }),
    url: BaseCommand.urlFlag,
  };

  async run(): Promise<CreatedToken> {
    const { flags } = await this.parse(TokensCreate);
    const { parseDuration } = await import('../../cli/duration.ts');
    let expiresAt: string | undefined = flags['expires-at'];
    if (flags['expires-in']) expiresAt = new Date(Date.now() + parseDuration(flags['expires-in'], '--expires-in')).toISOString();
    if (expiresAt !== undefined && Number.isNaN(Date.parse(expiresAt))) throw usageError('--expires-at must be an ISO 8601 time, such as 2027-01-31T00:00:00Z.');
    const amount = (flag: 'budget-daily' | 'budget-monthly') => {
      const text = flags[flag];
      if (text === undefined) return undefined;
      const value = Number(text);
      if (!/^\d+(\.\d+)?$/.test(text.trim()) || !Number.isFinite(value)) throw usageError(`--${flag} must be an amount of 0 or more, such as 5 or 2.50.`);
      return value;
    };
    const budget = { ...(amount('budget-daily') !== undefined ? { daily: amount('budget-daily') } : {}), ...(amount('budget-monthly') !== undefined ? { monthly: amount('budget-monthly') } : {}) };
    const profile = this.selectProfile(flags.profile);
    const client = await this.rpc(profile, flags.url);
    const created: CreatedToken = await client.call('tokens.create', {
      name: flags.name, scopes: scopeList(flags.scope, TOKEN_SCOPES), ...(expiresAt ? { expiresAt } : {}), ...(Object.keys(budget).length ? { budget } : {}),
    });
    if (flags.save) {
      const [{ ensureProfile }, { openSecretStore }] = await Promise.all([import('../../shared/profile-setup.ts'), import('../../shared/secrets/secret-store.ts')]);
      const store = openSecretStore(profile.paths, (await ensureProfile(profile.paths)).backend);
      await store.set(`tokens.saved.${created.id.replace(/[^A-Za-z0-9_-]/g, '_')}`, created.token);
      created.saved = store.location;
    }
    const capped = created.budget ? `, spending at most ${[created.budget.daily !== undefined ? `${created.budget.daily} a day` : '', created.budget.monthly !== undefined ? `${created.budget.monthly} a month` : ''].filter(Boolean).join(' and ')}` : '';
    this.say(`Created token ${created.id} "${created.name}" (${created.scopes.join(', ')}), expires ${created.expiresAt}${capped}.`);
    this.say(created.saved ? `Saved in ${created.saved}. It is shown once:` : 'It is shown once; store it now:');
    this.say(created.token);
    return created;
  }
}
