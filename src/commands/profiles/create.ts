import { existsSync } from 'node:fs';
import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
import { GatewayError } from '../../shared/errors.ts';
import { SECRET_BACKENDS } from '../../shared/config/schema.ts';

export interface CreateResult {
  name: string;
  dir: string;
  port: number;
  secretStore: string;
}

export default class ProfilesCreate extends BaseCommand<CreateResult> {
  static override summary = 'Create an isolated profile with its own folder, port, secrets and daemon.';
  static override examples = [
    '<%= config.bin %> profiles create staging --port 18800',
    '<%= config.bin %> profiles create ci --secrets file',
  ];
  static override args = { name: Args.string({ description: 'profile name: a-z, 0-9, "_" and "-", up to 32 characters', required: true }) };
  static override flags = {
    port: Flags.integer({ description: 'listen port (default: derived from the name, stable)', min: 1, max: 65535 }),
    secrets: Flags.string({ description: 'secret store (default: the OS keychain where reachable, else a 0600 file)', options: [...SECRET_BACKENDS] }),
  };

  async run(): Promise<CreateResult> {
    const { args, flags } = await this.parse(ProfilesCreate);
    const [{ assertProfileName, profilePaths }, { profileExists, configuredPort }, { ensureProfile }] = await Promise.all([
      import('../../shared/profile.ts'),
      import('../../shared/profiles.ts'),
      import('../../shared/profile-setup.ts'),
    ]);
    const name = assertProfileName(args.name);
    const paths = profilePaths(name);
    if (profileExists(name) && (name !== 'default' || existsSync(paths.config))) {
      throw new GatewayError(`Profile "${name}" already exists.`, { code: 'EXISTS', hints: [`gateway profiles show ${name}`] });
    }
    const setup = await ensureProfile(paths, { backend: flags.secrets, port: flags.port });
    if (setup.warning) this.warning(setup.warning);
    const port = configuredPort(name);
    this.say(`Created profile "${name}" in ${paths.dir} (port ${port}, secrets in the ${setup.backend} store).`);
    return { name, dir: paths.dir, port, secretStore: setup.backend };
  }
}
