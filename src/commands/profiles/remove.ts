import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
import { confirm } from '../../cli/prompt.ts';
import { GatewayError, usageError } from '../../shared/errors.ts';

export interface RemoveResult {
  name: string;
  removed: boolean;
  stoppedDaemon: boolean;
  secretsRemoved: number;
  /** What --force left behind, and why (secrets in a keychain out of reach). */
  left?: { what: string; why: string }[];
}

export default class ProfilesRemove extends BaseCommand<RemoveResult> {
  static override summary = 'Remove a profile: stop its daemon, delete its folder and its keychain entries.';
  static override description = 'Asks for confirmation on a terminal; without one, pass --yes. When its keychain is out of reach (over SSH), --force removes everything else and says what it left.';
  static override examples = ['<%= config.bin %> profiles remove staging --yes', '<%= config.bin %> profiles remove staging --yes --force   # over SSH, keychain out of reach'];
  static override args = { name: Args.string({ description: 'profile name', required: true }) };
  static override flags = {
    yes: Flags.boolean({ char: 'y', description: 'remove without asking' }),
    force: Flags.boolean({ description: 'remove what can be removed even when the profile\'s keychain is out of reach, and say what was left' }),
  };

  async run(): Promise<RemoveResult> {
    const { args, flags } = await this.parse(ProfilesRemove);
    const [{ assertProfileName, profilePaths, currentProfileFile }, { requireProfile, savedProfile }, { rmSync }] = await Promise.all([
      import('../../shared/profile.ts'),
      import('../../shared/profiles.ts'),
      import('node:fs'),
    ]);
    const name = assertProfileName(args.name);
    if (name === 'default') throw usageError('The default profile always exists and cannot be removed.');
    requireProfile(name);
    const paths = profilePaths(name);
    if (!flags.yes && !(await confirm(`Remove profile "${name}" with its state, logs and secrets?`, '--yes'))) {
      throw new GatewayError('Nothing was removed.', { hints: [`gateway profiles remove ${name} --yes`] });
    }
    const [{ stopDaemon }, { profileSecretStore }] = await Promise.all([import('../../cli/supervisor.ts'), import('../../shared/profile-setup.ts')]);
    const stopped = await stopDaemon(paths, { force: true, timeoutMs: 15_000 });
    let secretsRemoved = 0;
    const left: { what: string; why: string }[] = [];
    const store = profileSecretStore(paths);
    if (store) {
      try {
        secretsRemoved = (await store.list()).length;
        await store.clear();
      } catch (error) {
        if (!flags.force) {
          throw new GatewayError(`Profile "${name}" was not removed: its secrets could not be removed from ${store.location}: ${(error as Error).message}`, {
            hints: [`gateway profiles remove ${name} --yes --force   # removes the rest and says what it left`],
          });
        }
        left.push({ what: `secrets in ${store.location}`, why: (error as Error).message });
      }
    }
    // Its agents' workspaces are file systems of their own, mounted until now: unmounted (their loop devices go with them) before anything is removed.
    const { unmountImages } = await import('../../shared/workspace-image.ts');
    unmountImages(paths.dir);
    rmSync(paths.dir, { recursive: true, force: true });
    if (savedProfile() === name) rmSync(currentProfileFile(), { force: true });
    this.say(`Removed profile "${name}".`);
    for (const item of left) this.warning(`Left ${item.what} (${item.why}). Remove them from a session that reaches the keychain, e.g. with seahorse or secret-tool.`);
    return { name, removed: true, stoppedDaemon: stopped.state === 'stopped', secretsRemoved, ...(left.length > 0 ? { left } : {}) };
  }
}
