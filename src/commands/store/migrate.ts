import { Flags } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
import type { StoreMigrateResult } from '../../cli/store-migrate.ts';

export default class StoreMigrate extends BaseCommand<StoreMigrateResult> {
  static override summary = "Copy the profile's SQLite state into an empty PostgreSQL database and switch the profile to it.";
  static override description = 'The daemon must be stopped. Everything is copied in one transaction, so a failure leaves the database empty; a database that already holds a gateway\'s data is refused. A password in the URL goes to the secret store as store.password, never to config. The SQLite file stays as it was.';
  static override examples = [
    '<%= config.bin %> store migrate --to postgres://gateway@db.internal/gateway',
    'PGPASSWORD=... <%= config.bin %> store migrate --to postgres://gateway@db.internal:5432/gateway --json',
  ];
  static override flags = {
    to: Flags.string({ description: 'the empty PostgreSQL database: postgres://user[:password]@host[:port]/database', required: true }),
  };

  async run(): Promise<StoreMigrateResult> {
    const { flags } = await this.parse(StoreMigrate);
    const profile = this.existingProfile(flags.profile);
    // The copy is the store's own code: this command and `gateway run` are the two that reach into the daemon's side.
    const [{ migrateToPostgres }, { copySqliteToPostgres }, { ensureProfile }, { openSecretStore }] = await Promise.all([
      import('../../cli/store-migrate.ts'),
      import('../../server/store/copy-to-postgres.ts'),
      import('../../shared/profile-setup.ts'),
      import('../../shared/secrets/secret-store.ts'),
    ]);
    const setup = await ensureProfile(profile.paths);
    const result = await migrateToPostgres(profile.paths, flags.to, openSecretStore(profile.paths, setup.backend), copySqliteToPostgres, (line) => this.note(line));
    this.say(`Copied ${result.rows} rows in ${result.tables} tables (schema version ${result.schemaVersion}) from ${result.from} to ${result.to}.`);
    this.say(`Profile ${result.profile} now keeps its state there (store.url)${result.passwordStored ? '; the password is the secret store.password' : ''}. ${result.from} was left as it was.`);
    this.say(`Start it: gateway start${result.profile === 'default' ? '' : ` --profile ${result.profile}`}`);
    return result;
  }
}
