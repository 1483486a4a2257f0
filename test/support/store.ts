import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Store } from '../../src/server/store/database.ts';

/** Registers mocha hooks giving each test a fresh, migrated database in a temporary folder; returns a getter. */
export function freshStore(): () => Store {
  let dir: string;
  let store: Store;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'gateway-store-'));
    store = new Store({ path: join(dir, 'state.db'), synchronous: 'normal' });
  });
  afterEach(() => {
    store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return () => store;
}
