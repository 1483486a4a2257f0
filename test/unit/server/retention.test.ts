import { expect } from 'chai';
import { JobQueue } from '../../../src/server/jobs/job-queue.ts';
import type { Store } from '../../../src/server/store/database.ts';
import { inBatches, pruneRows, RETENTION_BATCH } from '../../../src/server/store/retention.ts';
import { freshStore } from '../../support/store.ts';

const DAY = 86_400_000;
const INSERT_RESPONSE = "INSERT INTO responses (id, owner, messages, response, created_at) VALUES (?, 'o', '[]', '{}', ?)";

describe('retention in bounded batches', () => {
  it('runs batches until one comes back short, the event loop taking a turn between two', async () => {
    const sizes = [3, 3, 1];
    const events: string[] = [];
    const total = await inBatches(async (limit) => {
      events.push(`batch ${limit}`);
      const deleted = sizes.shift()!;
      // A callback queued by a batch runs before the next batch, never inside the run of batches.
      setImmediate(() => events.push('turn'));
      return deleted;
    }, 3);
    expect(total).to.equal(7);
    expect(events).to.deep.equal(['batch 3', 'turn', 'batch 3', 'turn', 'batch 3']);
  });

  for (const engine of ['sqlite', 'postgres'] as const) describe(engine, () => {
    const current = freshStore(engine);
    let store: Store;
    beforeEach(() => {
      store = current();
    });

    it(`deletes more rows than a batch holds, ${RETENTION_BATCH} a statement, yielding between statements, and says how many`, async () => {
      const old = Date.now() - 40 * DAY;
      const rows = 2 * RETENTION_BATCH + 17;
      await store.transaction(async (tx) => {
        for (let n = 0; n < rows; n++) await tx.run(INSERT_RESPONSE, `resp_${n}`, old);
        await tx.run(INSERT_RESPONSE, 'resp_new', Date.now());
      });
      const deletes: number[] = [];
      let turns = 0;
      const run = store.run.bind(store);
      store.run = async (sql, ...params) => {
        const result = await run(sql, ...params);
        if (sql.startsWith('DELETE')) deletes.push(turns);
        return result;
      };
      // Counts the event loop's turns (a check phase each) while the prune runs.
      let counting = true;
      const count = () => {
        if (!counting) return;
        turns++;
        setImmediate(count);
      };
      setImmediate(count);
      const pruned = await pruneRows(store, 'responses', 'id', 'created_at < ?', Date.now() - 30 * DAY);
      counting = false;
      expect(pruned).to.equal(rows);
      expect(deletes).to.have.length(3);
      expect(deletes[1]! > deletes[0]! && deletes[2]! > deletes[1]!, `the event loop turned between batches: ${deletes}`).to.equal(true);
      expect((await store.all('SELECT id FROM responses')).map((row) => row.id)).to.deep.equal(['resp_new']);
    });

    it('deletes by a key of several columns', async () => {
      const old = Date.now() - 40 * DAY;
      await store.transaction(async (tx) => {
        for (let n = 0; n < RETENTION_BATCH + 5; n++) {
          await tx.run('INSERT INTO channel_inbound_seen (channel, account, platform_id, seen_at) VALUES (?, ?, ?, ?)', 'irc', 'a', `m${n}`, n === 0 ? Date.now() : old);
        }
      });
      expect(await pruneRows(store, 'channel_inbound_seen', 'channel, account, platform_id', 'seen_at < ?', Date.now() - DAY)).to.equal(RETENTION_BATCH + 4);
      expect((await store.all('SELECT platform_id FROM channel_inbound_seen')).map((row) => row.platform_id)).to.deep.equal(['m0']);
    });

    it('prunes more finished jobs than a batch holds, with their payloads, and keeps the rest', async () => {
      let now = 1_000_000;
      const queue = new JobQueue(store, { now: () => now });
      const total = RETENTION_BATCH + 3;
      const ids: string[] = [];
      for (let n = 0; n < total; n++) ids.push(await queue.enqueue({ kind: 'k', payload: { n }, ran: n % 2 === 0 ? { status: 'failed', error: 'x' } : undefined, maxAttempts: 1 }));
      for (const job of await queue.claim(total)) await queue.succeed(job.id, null);
      now += 31 * DAY;
      const kept = await queue.enqueue({ kind: 'k', payload: null });
      expect(await queue.prune(30)).to.equal(total);
      expect((await store.all('SELECT id FROM jobs')).map((row) => row.id)).to.deep.equal([kept]);
      expect((await store.all('SELECT job_id FROM job_payloads')).map((row) => row.job_id)).to.deep.equal([kept]);
    });
  });
});
