import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Store } from '../../src/server/store/database.ts';
import { freePort } from './cli.ts';
import { sharedPostgres } from './postgres.ts';

/**
 * Registers mocha hooks giving each test a fresh, migrated store in a
 * temporary folder (SQLite) or a new database of the tests' PostgreSQL server;
 * returns a getter.
 */
export function freshStore(engine: 'sqlite' | 'postgres' = 'sqlite'): () => Store {
  let dir: string;
  let store: Store;
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gateway-store-'));
    const url = engine === 'postgres' ? (await sharedPostgres(freePort)).createDatabase() : undefined;
    store = new Store({ path: join(dir, 'state.db'), synchronous: 'normal', url });
  });
  afterEach(() => {
    store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return () => store;
}
