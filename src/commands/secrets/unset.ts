import { Args } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';

export interface SecretUnsetResult {
  profile: string;
  name: string;
  removed: boolean;
  daemonNotified: boolean;
}

export default class SecretsUnset extends BaseCommand<SecretUnsetResult> {
  static override summary = 'Remove a secret from the profile\'s store.';
  static override examples = ['<%= config.bin %> secrets unset hooks.token'];
  static override args = { name: Args.string({ description: 'secret name', required: true }) };

  async run(): Promise<SecretUnsetResult> {
    const { args, flags } = await this.parse(SecretsUnset);
    const profile = this.existingProfile(flags.profile);
    const [{ assertUserSecretName }, { profileSecretStore }, { notifyDaemon }] = await Promise.all([
      import('../../shared/secrets/names.ts'),
      import('../../shared/profile-setup.ts'),
      import('../../cli/secret-notify.ts'),
    ]);
    const name = assertUserSecretName(args.name);
    const store = profileSecretStore(profile.paths);
    const removed = store ? await store.delete(name) : false;
    if (removed && name === 'webhooks.github.secret') await store!.delete(`${name}.previous`);
    const daemonNotified = removed ? await notifyDaemon(profile.paths, name) : false;
    this.say(removed ? `Removed ${name} from profile "${profile.name}".` : `${name} was not set in profile "${profile.name}".`);
    return { profile: profile.name, name, removed, daemonNotified };
  }
}
