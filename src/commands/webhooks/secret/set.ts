import SecretsSet from '../../secrets/set.ts';

/** `gateway webhooks secret set` is `gateway secrets set webhooks.github.secret`. */
export default class WebhooksSecretSet extends SecretsSet {
  static override summary = 'Store the webhook signing secret, read from stdin (same as `gateway secrets set webhooks.github.secret`).';
  static override examples = ['<%= config.bin %> webhooks secret set --keep-previous < new-secret'];
  // The name is fixed, so the alias takes no argument.
  static override args = {} as unknown as typeof SecretsSet.args;

  protected override secretName(_args: { name?: string }): string {
    return 'webhooks.github.secret';
  }
}
