import { expect } from 'chai';
import { statSync } from 'node:fs';
import { pino } from 'pino';
import { Checkpointer } from '../../../src/server/store/checkpointer.ts';
import { Store } from '../../../src/server/store/database.ts';
import type { SqliteEngine } from '../../../src/server/store/sqlite-engine.ts';
import { waitFor } from '../../support/cli.ts';
import { freshStore } from '../../support/store.ts';

describe('background checkpoints', () => {
  const current = freshStore();

  it('copy the WAL into the database from their own thread, and the data stays whole', async () => {
    const store = current();
    const path = (store.engine as SqliteEngine).db.location()!;
    const checkpointer = new Checkpointer(store, { path, synchronous: 'normal', logger: pino({ level: 'silent' }) });
    checkpointer.start();
    const insert = store.prepare('INSERT INTO audit_events (at, kind, detail) VALUES (?, ?, ?)');
    store.transaction(() => {
      for (let i = 0; i < 2000; i++) insert.run(i, 'test.event', 'x'.repeat(500));
    });
    expect(statSync(`${path}-wal`).size).to.be.greaterThan(1_000_000);
    // The daemon's connection now checkpoints only past 65,536 pages, so only the thread can have
    // moved these pages into the database file.
    const dbBefore = statSync(path).size;
    expect(dbBefore).to.be.lessThan(1_000_000);
    await waitFor(() => statSync(path).size > 1_000_000 || undefined, 10_000, 'the thread to copy the WAL into the database');
    await checkpointer.stop();
    store.close();
    const reopened = new Store({ path, synchronous: 'normal' });
    expect((reopened.prepare('SELECT COUNT(*) AS n FROM audit_events WHERE kind = ?').get('test.event') as { n: number }).n).to.equal(2000);
    reopened.close();
  });
});
