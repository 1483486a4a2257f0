import { expect } from 'chai';
import { statSync } from 'node:fs';
import { pino } from 'pino';
import { Checkpointer } from '../../../src/server/store/checkpointer.ts';
import { Store } from '../../../src/server/store/database.ts';
import { DEFAULT_AUTOCHECKPOINT_PAGES, type SqliteEngine } from '../../../src/server/store/sqlite-engine.ts';
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

  it('empty the WAL file and stop after a while without writes, and start again with the next load', async () => {
    const store = current();
    const path = (store.engine as SqliteEngine).db.location()!;
    const lines: string[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => { lines.push(JSON.parse(line).msg); } });
    const checkpointer = new Checkpointer(store, { path, synchronous: 'normal', logger, idleMs: 600, intervalMs: 100 });
    const insert = store.prepare('INSERT INTO audit_events (at, kind, detail) VALUES (?, ?, ?)');
    const load = (from: number) => store.transaction(() => {
      for (let i = from; i < from + 2000; i++) insert.run(i, 'test.event', 'x'.repeat(500));
    });
    checkpointer.start();
    expect(checkpointer.running).to.equal(true);
    load(0);
    expect(statSync(`${path}-wal`).size).to.be.greaterThan(1_000_000);
    // Writes in between keep it going.
    for (let i = 0; i < 6; i++) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      insert.run(10_000 + i, 'test.event', 'again');
    }
    expect(checkpointer.running).to.equal(true);
    await waitFor(() => !checkpointer.running || undefined, 10_000, 'the idle thread to stop');
    expect(statSync(`${path}-wal`).size).to.equal(0);
    expect(store.autocheckpointPages).to.equal(DEFAULT_AUTOCHECKPOINT_PAGES);
    expect(lines).to.include('checkpoints are back on the daemon thread after a while without writes; the WAL file was emptied');
    // The daemon's connection goes on as before, checkpointing inline, and the next load starts a thread again.
    load(20_000);
    expect(statSync(`${path}-wal`).size).to.be.greaterThan(0).and.lessThan(8_000_000);
    checkpointer.start();
    expect(checkpointer.running).to.equal(true);
    await checkpointer.stop();
    store.close();
    const reopened = new Store({ path, synchronous: 'normal' });
    expect((reopened.prepare('SELECT COUNT(*) AS n FROM audit_events WHERE kind = ?').get('test.event') as { n: number }).n).to.equal(4006);
    reopened.close();
  });
});
