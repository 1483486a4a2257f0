import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { DAEMON_NODE_FLAGS } from '../../../src/shared/run-args.ts';

const REDUCER = new URL('../../../src/server/core/memory-reducer.ts', import.meta.url).href;
const THREADS = new URL('../../../src/server/kernel/threads.ts', import.meta.url).href;

/** A process with the daemon's flags that makes a burst of garbage, then goes quiet; what it reports of its RSS. */
function burstThenIdle(): { before: number; burst: number; after: number; told: { rssBefore: number; rssAfter: number; ms: number }[] } {
  const script = `
    import { startMemoryReducer } from ${JSON.stringify(REDUCER)};
    const told = [];
    const stop = startMemoryReducer({ debug: (fields) => told.push(fields) }, { intervalMs: 200, growthBytes: 16 * 1024 * 1024 });
    const before = process.memoryUsage.rss();
    let keep = [];
    const started = Date.now();
    while (Date.now() - started < 1500) {
      const batch = [];
      for (let i = 0; i < 1000; i++) batch.push({ text: 'x'.repeat(200) + i, i });
      keep.push(batch);
      if (keep.length > 100) keep = keep.slice(50);
    }
    keep = [];
    const burst = process.memoryUsage.rss();
    await new Promise((resolve) => setTimeout(resolve, 1500));
    stop();
    process.stdout.write(JSON.stringify({ before, burst, after: process.memoryUsage.rss(), told }));
  `;
  const child = spawnSync(process.execPath, [...DAEMON_NODE_FLAGS, '--input-type=module', '-e', script], { encoding: 'utf8' });
  expect(child.status, child.stderr).to.equal(0);
  return JSON.parse(child.stdout);
}

/** What the reducer says in the second after it starts, in a process whose server has or has not had a client by then. */
function settleMessages(served: boolean): string[] {
  const script = `
    import { createServer } from 'node:http';
    import { startMemoryReducer } from ${JSON.stringify(REDUCER)};
    const told = [];
    const stop = startMemoryReducer({ debug: (_fields, message) => told.push(message) }, { settleMs: 300 });
    const server = createServer((req, res) => res.end('ok'));
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    if (${served}) await (await fetch('http://127.0.0.1:' + server.address().port + '/')).text();
    await new Promise((resolve) => setTimeout(resolve, 1000));
    server.closeAllConnections();
    server.close();
    stop();
    process.stdout.write(JSON.stringify(told));
  `;
  const child = spawnSync(process.execPath, [...DAEMON_NODE_FLAGS, '--input-type=module', '-e', script], { encoding: 'utf8' });
  expect(child.status, child.stderr).to.equal(0);
  return JSON.parse(child.stdout);
}

describe('memory reducer', () => {
  it('gives start-up memory back a moment after ready, unless a client came first', function () {
    this.timeout(20_000);
    expect(settleMessages(false)).to.deep.equal(['gave start-up memory back']);
    expect(settleMessages(true)).to.deep.equal([]);
  });

  it('gives the memory of a burst back once the process is idle, and says so', function () {
    this.timeout(20_000);
    const { before, burst, after, told } = burstThenIdle();
    const mb = (bytes: number) => bytes / 1024 / 1024;
    expect(mb(burst - before), 'the burst grew the heap').to.be.above(48);
    expect(told).to.have.length(1);
    expect(told[0]!.rssBefore).to.be.above(told[0]!.rssAfter);
    // Most of what the burst took is back with the system.
    expect(mb(after - before)).to.be.below(mb(burst - before) / 2);
  });

  it('gives memory back at the next idle checks once a thread of the daemon was let go, however little RSS grew', function () {
    this.timeout(20_000);
    const script = `
      import { channel } from 'node:diagnostics_channel';
      import { startMemoryReducer } from ${JSON.stringify(REDUCER)};
      import { THREAD_RELEASED } from ${JSON.stringify(THREADS)};
      const told = [];
      // A growth no burst here reaches: only the release can start a collection.
      const stop = startMemoryReducer({ debug: (_fields, message) => told.push(message) }, { intervalMs: 100, growthBytes: 1024 ** 4, settleMs: 10_000 });
      await new Promise((resolve) => setTimeout(resolve, 600));
      const quiet = told.length;
      channel(THREAD_RELEASED).publish({ thread: 'test' });
      await new Promise((resolve) => setTimeout(resolve, 600));
      stop();
      process.stdout.write(JSON.stringify({ quiet, told }));
    `;
    const child = spawnSync(process.execPath, [...DAEMON_NODE_FLAGS, '--input-type=module', '-e', script], { encoding: 'utf8' });
    expect(child.status, child.stderr).to.equal(0);
    expect(JSON.parse(child.stdout)).to.deep.equal({ quiet: 0, told: ['gave memory back after a busy spell'] });
  });
});
