import { expect } from 'chai';
import { statSync } from 'node:fs';
import { pino } from 'pino';
import { Checkpointer } from '../../../src/server/store/checkpointer.ts';
import { Store } from '../../../src/server/store/database.ts';
import { DEFAULT_AUTOCHECKPOINT_PAGES } from '../../../src/server/store/sqlite-engine.ts';
import { waitFor } from '../../support/cli.ts';
import { freshStore } from '../../support/store.ts';

const INSERT = 'INSERT INTO audit_events (at, kind, detail) VALUES (?, ?, ?)';
const fileOf = async (store: Store) => String((await store.get<{ file: string }>('SELECT file FROM pragma_database_list WHERE name = ?', 'main'))!.file);

describe('background checkpoints', () => {
  const current = freshStore();

  it('copy the WAL into the database from their own thread, and the data stays whole', async () => {
    const store = current();
    const path = await fileOf(store);
    const checkpointer = new Checkpointer(store, { path, synchronous: 'normal', logger: pino({ level: 'silent' }) });
    checkpointer.start();
    await store.transaction(async (tx) => {
      for (let i = 0; i < 2000; i++) await tx.run(INSERT, i, 'test.event', 'x'.repeat(500));
    });
    expect(statSync(`${path}-wal`).size).to.be.greaterThan(1_000_000);
    // The daemon's connection now checkpoints only past 65,536 pages, so only the thread can have
    // moved these pages into the database file.
    const dbBefore = statSync(path).size;
    expect(dbBefore).to.be.lessThan(1_000_000);
    await waitFor(() => statSync(path).size > 1_000_000 || undefined, 10_000, 'the thread to copy the WAL into the database');
    await checkpointer.stop();
    await store.close();
    const reopened = await Store.open({ path, synchronous: 'normal' });
    expect((await reopened.get<{ n: number }>('SELECT COUNT(*) AS n FROM audit_events WHERE kind = ?', 'test.event'))!.n).to.equal(2000);
    await reopened.close();
  });

  it('empty the WAL file and stop after a while without writes, and start again with the next load', async () => {
    const store = current();
    const path = await fileOf(store);
    const lines: string[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => { lines.push(JSON.parse(line).msg); } });
    const checkpointer = new Checkpointer(store, { path, synchronous: 'normal', logger, idleMs: 600, intervalMs: 100 });
    const load = (from: number) => store.transaction(async (tx) => {
      for (let i = from; i < from + 2000; i++) await tx.run(INSERT, i, 'test.event', 'x'.repeat(500));
    });
    checkpointer.start();
    expect(checkpointer.running).to.equal(true);
    await load(0);
    expect(statSync(`${path}-wal`).size).to.be.greaterThan(1_000_000);
    // Writes in between keep it going.
    for (let i = 0; i < 6; i++) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      await store.run(INSERT, 10_000 + i, 'test.event', 'again');
    }
    expect(checkpointer.running).to.equal(true);
    await waitFor(() => !checkpointer.running || undefined, 10_000, 'the idle thread to stop');
    expect(statSync(`${path}-wal`).size).to.equal(0);
    expect(store.autocheckpointPages).to.equal(DEFAULT_AUTOCHECKPOINT_PAGES);
    expect(lines).to.include('checkpoints are back on the daemon thread after a while without writes; the WAL file was emptied');
    // The daemon's connection goes on as before, checkpointing inline, and the next load starts a thread again.
    await load(20_000);
    expect(statSync(`${path}-wal`).size).to.be.greaterThan(0).and.lessThan(8_000_000);
    checkpointer.start();
    expect(checkpointer.running).to.equal(true);
    await checkpointer.stop();
    await store.close();
    const reopened = await Store.open({ path, synchronous: 'normal' });
    expect((await reopened.get<{ n: number }>('SELECT COUNT(*) AS n FROM audit_events WHERE kind = ?', 'test.event'))!.n).to.equal(4006);
    await reopened.close();
  });
});
