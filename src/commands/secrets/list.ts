import { BaseCommand } from '../../cli/base-command.ts';
import { table } from '../../cli/table.ts';

export interface SecretsListResult {
  profile: string;
  backend: string | null;
  location: string | null;
  /** Names only, never values; source env means an environment variable overrides the store. */
  secrets: { name: string; source: 'store' | 'env'; overriddenByEnv: boolean }[];
}

export default class SecretsList extends BaseCommand<SecretsListResult> {
  static override summary = 'List the names of the profile\'s secrets and where they are kept (never their values).';
  static override examples = ['<%= config.bin %> secrets list --json'];

  async run(): Promise<SecretsListResult> {
    const { flags } = await this.parse(SecretsList);
    const profile = this.existingProfile(flags.profile);
    const [{ profileSecretStore }, { SECRET_ENV, isUserSecretName }] = await Promise.all([
      import('../../shared/profile-setup.ts'),
      import('../../shared/secrets/names.ts'),
    ]);
    const store = profileSecretStore(profile.paths);
    const stored = store ? (await store.list()).filter(isUserSecretName) : [];
    const fromEnv = Object.entries(SECRET_ENV).filter(([, variable]) => process.env[variable]).map(([name]) => name);
    const names = [...new Set([...stored, ...fromEnv])].sort();
    const secrets = names.map((name) => ({
      name,
      source: stored.includes(name) ? ('store' as const) : ('env' as const),
      overriddenByEnv: fromEnv.includes(name),
    }));
    this.say(`Secrets of profile "${profile.name}" (${store ? store.location : 'no store yet'}):`);
    this.say(secrets.length ? table(['NAME', 'SOURCE'], secrets.map((s) => [s.name, s.overriddenByEnv ? `${s.source} (overridden by ${SECRET_ENV[s.name]})` : s.source])) : '  none');
    return { profile: profile.name, backend: store?.backend ?? null, location: store?.location ?? null, secrets };
  }
}
