import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
import { GatewayError, usageError } from '../../shared/errors.ts';

export interface SecretsMoveResult {
  profile: string;
  from: string;
  to: string;
  /** Secrets now in the new store (names only). */
  moved: string[];
  /** Secrets left behind: their names, or null when the old store could not even be listed (--abandon). */
  abandoned: string[] | null;
  /** Whether the old store was emptied; when not, where the copies still are. */
  oldStoreCleared: boolean;
  oldStoreLocation: string;
}

export default class SecretsMove extends BaseCommand<SecretsMoveResult> {
  static override summary = 'Move the profile\'s secrets to another store (keychain or file), for good.';
  static override description = [
    'Copies every secret into the new store, checks each copy, records the new store in profile.json, then empties the old one.',
    'The daemon must be stopped. Over SSH without a D-Bus session the keychain cannot be read: reach it (dbus-run-session, then unlock',
    'the keyring) and move, or pass --abandon to start over in the file store, leaving the keychain secrets behind (the daemon makes a',
    'new gateway token at its next start; set the others again with `gateway secrets set`).',
  ].join(' ');
  static override examples = [
    '<%= config.bin %> secrets move file',
    '<%= config.bin %> secrets move file --abandon   # the keychain is out of reach for good',
    '<%= config.bin %> secrets move keychain --profile staging',
  ];
  static override args = { store: Args.string({ description: 'the store to move to', options: ['keychain', 'file'], required: true }) };
  static override flags = {
    abandon: Flags.boolean({ description: 'move even when the old store cannot be read, leaving its secrets behind' }),
  };

  async run(): Promise<SecretsMoveResult> {
    const { args, flags } = await this.parse(SecretsMove);
    const profile = this.existingProfile(flags.profile);
    const [{ readIdentity, writeIdentity }, { openSecretStore }, { inspectDaemon }, { chooseSecretBackend }] = await Promise.all([
      import('../../shared/profile-identity.ts'),
      import('../../shared/secrets/secret-store.ts'),
      import('../../shared/daemon-lock.ts'),
      import('../../shared/profile-setup.ts'),
    ]);
    const to = args.store as 'keychain' | 'file';
    const identity = readIdentity(profile.paths);
    if (!identity) throw new GatewayError(`Profile "${profile.name}" has no secret store yet; it gets one at its first start.`, { hints: [`gateway profiles create ${profile.name} --secrets ${to}`] });
    const from = identity.secrets;
    const oldStore = openSecretStore(profile.paths, from);
    if (from === to) {
      this.say(`Profile "${profile.name}" keeps its secrets in the ${to} store already.`);
      return { profile: profile.name, from, to, moved: [], abandoned: [], oldStoreCleared: false, oldStoreLocation: oldStore.location };
    }
    const daemon = inspectDaemon(profile.paths);
    if (daemon.state === 'running' || daemon.state === 'starting') {
      throw usageError(`The daemon of profile "${profile.name}" is running and reads its secrets from the ${from} store; stop it first.`, [
        `gateway stop --profile ${profile.name} && gateway secrets move ${to} --profile ${profile.name} && gateway start --profile ${profile.name}`,
      ]);
    }
    if (to === 'keychain') {
      const probe = await chooseSecretBackend(profile.paths);
      if (probe.backend !== 'keychain') {
        throw new GatewayError(`The OS keychain is not reachable here, so nothing was moved: ${probe.warning ?? ''}`, { hints: ['run the command inside a desktop session (its DBUS_SESSION_BUS_ADDRESS)'] });
      }
    }

    // Read everything first: nothing is written anywhere until the old store has answered for every secret.
    let values: [string, string][] | undefined;
    let unreadable: Error | undefined;
    try {
      values = [];
      for (const name of await oldStore.list()) {
        const value = await oldStore.get(name);
        if (value !== undefined) values.push([name, value]);
      }
    } catch (error) {
      unreadable = error as Error;
    }
    if (unreadable && !flags.abandon) {
      throw new GatewayError(`The ${from} store of profile "${profile.name}" cannot be read, so nothing was moved: ${unreadable.message}`, {
        hints: [
          from === 'keychain'
            ? `reach the keychain and move: dbus-run-session -- sh -c 'printf %s "$KEYRING_PASSWORD" | gnome-keyring-daemon --unlock >/dev/null; gateway secrets move ${to} --profile ${profile.name}'`
            : `restore ${profile.paths.secrets}, then move`,
          `or start over in the ${to} store, leaving the secrets behind: gateway secrets move ${to} --abandon --profile ${profile.name}`,
        ],
      });
    }

    const newStore = openSecretStore(profile.paths, to);
    const moved: string[] = [];
    for (const [name, value] of values ?? []) {
      await newStore.set(name, value);
      if ((await newStore.get(name)) !== value) throw new GatewayError(`The copy of ${name} in the ${to} store did not read back the same; the profile still uses the ${from} store.`);
      moved.push(name);
    }
    writeIdentity(profile.paths, { ...identity, secrets: to });

    // The old copies go last, once the profile uses the new store; a store out of reach keeps them, and that is said.
    let oldStoreCleared = false;
    if (!unreadable) {
      try {
        await oldStore.clear();
        oldStoreCleared = true;
      } catch (error) {
        this.warning(`The old copies could not be removed from ${oldStore.location}: ${(error as Error).message}`);
      }
    }
    const abandoned = unreadable ? null : [];
    this.say(`Profile "${profile.name}" now keeps its secrets in the ${to} store (${newStore.location}); moved ${moved.length ? moved.join(', ') : 'none'}.`);
    if (unreadable) {
      this.warning(`The secrets in ${oldStore.location} were left behind. The daemon makes a new gateway token at its next start; set the others again with gateway secrets set <name>.`);
    } else if (!oldStoreCleared) {
      this.warning(`Copies remain in ${oldStore.location}.`);
    }
    return { profile: profile.name, from, to, moved, abandoned, oldStoreCleared, oldStoreLocation: oldStore.location };
  }
}
