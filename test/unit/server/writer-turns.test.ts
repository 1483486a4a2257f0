import { expect } from 'chai';
import { once } from 'node:events';
import { Worker } from 'node:worker_threads';
import { WriterTurns } from '../../../src/server/store/writer-turns.ts';
import { freshStore } from '../../support/store.ts';

type FromWriter = { type: 'writing' } | { type: 'stopped'; commits: number };

describe('turns at the write lock with another thread of the daemon (sqlite)', () => {
  const current = freshStore('sqlite');

  it('a write of the daemon\'s thread waits for one of the other thread\'s transactions, and the other thread goes on after it', async () => {
    const store = current();
    const turns = new WriterTurns('daemon');
    store.shareWriteLock(turns);
    // A thread committing back to back, each transaction holding the lock 3 ms: SQLite's busy handler alone, sleeping and
    // retrying, would almost never find the lock free, and a write here would wait out the 5 s busy timeout and fail.
    const writer = new Worker(new URL('../../fixtures/threads/busy-writer.ts', import.meta.url), {
      workerData: { path: String((await store.get<{ file: string }>('SELECT file FROM pragma_database_list WHERE name = ?', 'main'))!.file), turns: turns.buffer, holdMs: 3 },
    });
    const messages: FromWriter[] = [];
    writer.on('message', (message: FromWriter) => messages.push(message));
    try {
      const [first] = await once(writer, 'message') as [FromWriter];
      expect(first.type).to.equal('writing');
      const slowest = { ms: 0 };
      const timed = async (write: () => Promise<unknown>) => {
        const started = performance.now();
        await write();
        slowest.ms = Math.max(slowest.ms, performance.now() - started);
      };
      const insert = 'INSERT INTO audit_events (at, kind) VALUES (?, ?)';
      for (let i = 0; i < 20; i++) {
        // A write on its own (a token created, an audit event), and a transaction.
        await timed(() => store.run(insert, Date.now(), 'daemon.write'));
        await timed(() => store.transaction((tx) => tx.run(insert, Date.now(), 'daemon.transaction')));
        // The other thread gets its turns in between.
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      // Each waited for about one transaction of the other thread (3 ms), far from the busy timeout.
      expect(slowest.ms).to.be.below(1000);
      const count = async (kind: string) => Number((await store.get<{ n: number }>('SELECT COUNT(*) AS n FROM audit_events WHERE kind = ?', kind))!.n);
      expect(await count('daemon.write')).to.equal(20);
      expect(await count('daemon.transaction')).to.equal(20);
      const before = await count('thread.write');
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(await count('thread.write')).to.be.above(before);
    } finally {
      writer.postMessage('stop');
      await once(writer, 'exit');
    }
    const stopped = messages.find((message) => message.type === 'stopped') as { commits: number };
    expect(stopped.commits).to.be.above(20);
  });

  it('the other thread stands aside while the daemon\'s thread waits to write, up to a bound', async () => {
    const daemon = new WriterTurns('daemon');
    const thread = new WriterTurns('thread', daemon.buffer);
    // The daemon's thread wants to write: the other thread's next transaction waits (here, out its bound of 250 ms).
    await daemon.enter();
    const started = performance.now();
    thread.enter();
    const waited = performance.now() - started;
    thread.leave();
    daemon.leave();
    expect(waited).to.be.at.least(200);
    // Nobody waiting: in at once, far from the bound.
    const again = performance.now();
    thread.enter();
    thread.leave();
    expect(performance.now() - again).to.be.below(150);
  });

  it('the daemon\'s thread waits for its turn without blocking: its event loop turns meanwhile', async () => {
    const daemon = new WriterTurns('daemon');
    const thread = new WriterTurns('thread', daemon.buffer);
    thread.enter();
    let ticks = 0;
    const ticker = setInterval(() => ticks++, 5);
    const turn = daemon.enter();
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(ticks).to.be.greaterThan(5);
    thread.leave();
    await turn;
    daemon.leave();
    clearInterval(ticker);
  });
});
