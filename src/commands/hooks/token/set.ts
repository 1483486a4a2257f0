import SecretsSet from '../../secrets/set.ts';

/** `gateway hooks token set` is `gateway secrets set hooks.token`. */
export default class HooksTokenSet extends SecretsSet {
  static override summary = 'Store the hooks ingress token, read from stdin (same as `gateway secrets set hooks.token`).';
  static override examples = ['openssl rand -hex 32 | <%= config.bin %> hooks token set'];
  static override args = {} as unknown as typeof SecretsSet.args;

  protected override secretName(_args: { name?: string }): string {
    return 'hooks.token';
  }
}
