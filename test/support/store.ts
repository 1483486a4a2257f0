import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as builtins from '../../src/server/compose.ts';
import type { GatewayModule } from '../../src/server/kernel/module.ts';
import { inDependencyOrder } from '../../src/server/kernel/host.ts';
import { Store } from '../../src/server/store/database.ts';
import { freePort } from './cli.ts';
import { sharedPostgres } from './postgres.ts';

/** Every built-in module's tables, migrated as a daemon does at start. */
export async function migrateBuiltins(store: Store): Promise<void> {
  const modules = inDependencyOrder(Object.values(builtins) as GatewayModule<unknown>[]);
  await store.migrate(modules.filter((module) => module.migrations).map((module) => ({ module: module.id, migrations: module.migrations! })));
}

/**
 * Registers mocha hooks giving each test a fresh store, with every built-in
 * module's tables, in a temporary folder (SQLite) or a new database of the
 * tests' PostgreSQL server; returns a getter.
 */
export function freshStore(engine: 'sqlite' | 'postgres' = 'sqlite', options: { applicationName?: string } = {}): () => Store {
  let dir: string;
  let store: Store;
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gateway-store-'));
    const url = engine === 'postgres' ? (await sharedPostgres(freePort)).createDatabase() : undefined;
    store = await Store.open({ path: join(dir, 'state.db'), synchronous: 'normal', url, ...options });
    await migrateBuiltins(store);
  });
  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return () => store;
}
