import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
import { usageError } from '../../shared/errors.ts';

export interface SecretSetResult {
  profile: string;
  name: string;
  backend: string;
  keptPrevious: boolean;
  daemonNotified: boolean;
}

export default class SecretsSet extends BaseCommand<SecretSetResult> {
  static override summary = 'Store a secret, reading its value from stdin (or a hidden prompt on a terminal).';
  static override description = 'Names: gateway.token, gateway.password, webhooks.github.secret, hooks.token, api.jwt.secret, api.serviceKey, channels.<id>.password. One trailing newline is stripped; an empty value is refused. A running daemon is told.';
  static override examples = [
    'printf %s "$TOKEN" | <%= config.bin %> secrets set gateway.password',
    '<%= config.bin %> secrets set webhooks.github.secret --keep-previous < new-secret.txt',
  ];
  static override args = { name: Args.string({ description: 'secret name', required: true }) };
  static override flags = {
    'keep-previous': Flags.boolean({ description: 'keep the old webhook secret valid too, for rotation (webhooks.github.secret only)' }),
  };

  /** The secret this command stores: the argument, or a fixed name in an alias. */
  protected secretName(args: { name?: string }): string {
    return args.name ?? '';
  }

  async run(): Promise<SecretSetResult> {
    const { args, flags } = await this.parse(this.ctor as typeof SecretsSet);
    const profile = this.selectProfile(flags.profile);
    const [{ assertUserSecretName }, { readSecretValue }, { ensureProfile }, { openSecretStore }, { notifyDaemon }] = await Promise.all([
      import('../../shared/secrets/names.ts'),
      import('../../cli/secret-input.ts'),
      import('../../shared/profile-setup.ts'),
      import('../../shared/secrets/secret-store.ts'),
      import('../../cli/secret-notify.ts'),
    ]);
    const name = assertUserSecretName(this.secretName(args as { name?: string }));
    if (flags['keep-previous'] && name !== 'webhooks.github.secret') {
      throw usageError('--keep-previous applies only to webhooks.github.secret.');
    }
    const value = await readSecretValue(name);
    const setup = await ensureProfile(profile.paths);
    if (setup.warning) this.warning(setup.warning);
    const store = openSecretStore(profile.paths, setup.backend);
    let keptPrevious = false;
    if (flags['keep-previous']) {
      const previous = await store.get(name);
      if (previous && previous !== value) {
        await store.set(`${name}.previous`, previous);
        keptPrevious = true;
      }
    } else if (name === 'webhooks.github.secret') {
      await store.delete(`${name}.previous`);
    }
    await store.set(name, value);
    if (name === 'hooks.token' && value === (await store.get('gateway.token'))) {
      this.warning('hooks.token equals the gateway token; give hooks a token of their own.');
    }
    const daemonNotified = await notifyDaemon(profile.paths, name);
    this.say(`Stored ${name} in the ${setup.backend} store of profile "${profile.name}"${keptPrevious ? ' (the previous value stays valid)' : ''}.`);
    return { profile: profile.name, name, backend: setup.backend, keptPrevious, daemonNotified };
  }
}
