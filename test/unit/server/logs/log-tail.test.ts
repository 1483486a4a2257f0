import { expect } from 'chai';
import { LogTail, parseLine } from '../../../../src/server/logs/log-tail.ts';

const line = (level: number, msg: string) => `${JSON.stringify({ level, time: '2026-01-01T00:00:00.000Z', msg })}\n`;
const settle = (ms = 15) => new Promise((resolve) => setTimeout(resolve, ms));

describe('logs: the last lines and the live tail', () => {
  let listener: ((text: string) => void) | undefined;
  let taps: number;
  let file: string | undefined;
  let pushed: { to: string; entries: { level: number; msg: string }[] }[];
  const tail = (limits = {}) => new LogTail({
    logFile: () => file,
    onLog: (receive) => {
      taps++;
      listener = receive;
      return () => { listener = undefined; };
    },
    readLast: (_path, count) => [line(30, 'one'), line(50, 'two failed'), 'not json', line(20, 'three')].slice(-count),
    limits: { batchMs: 5, ...limits },
  });
  const write = (text: string) => listener?.(text);
  const client = (log: LogTail, id: string) => log.admitted(id, (_event, payload) => void pushed.push({ to: id, entries: (payload as { entries: never[] }).entries }));

  beforeEach(() => {
    listener = undefined;
    taps = 0;
    file = '/var/log/gateway.log';
    pushed = [];
  });

  it('taps nothing while nobody follows a daemon that writes a file', async () => {
    const log = tail();
    expect(listener).to.equal(undefined);
    client(log, 'c1');
    log.follow('c1', undefined);
    expect(listener).to.be.a('function');
    log.unfollow('c1');
    expect(listener).to.equal(undefined);
    log.follow('c1', undefined);
    log.closed('c1');
    expect(listener, 'a client that leaves follows no more').to.equal(undefined);
    expect(taps).to.equal(2);
  });

  it('pushes lines in batches to each follower at its level, and says how many it skipped when they came too fast', async () => {
    const log = tail({ maxBatch: 3 });
    client(log, 'all');
    client(log, 'warn');
    log.follow('all', undefined);
    log.follow('warn', 'warn');
    write(line(30, 'started'));
    write(line(40, 'slow'));
    expect(pushed, 'batched').to.deep.equal([]);
    await settle();
    expect(pushed.map(({ to, entries }) => [to, entries.map((entry) => entry.msg)])).to.deep.equal([['all', ['started', 'slow']], ['warn', ['slow']]]);
    pushed = [];
    for (let n = 0; n < 5; n++) write(line(30, `m${n}`));
    await settle();
    expect(pushed[0]!.entries.map((entry) => entry.msg)).to.deep.equal(['m0', 'm1', 'm2', '2 log lines were skipped: they came faster than the live tail sends']);
    expect(pushed[1]!.entries.map((entry) => entry.level)).to.deep.equal([40]);
    log.stop();
  });

  it('reads the last lines of the file, at a level or above, holding a text', () => {
    const log = tail();
    expect(log.tail({ lines: 2 })).to.deep.equal({ entries: [{ level: 30, time: '', msg: 'not json' }, { level: 20, time: '2026-01-01T00:00:00.000Z', msg: 'three' }], source: 'file' });
    expect(log.tail({ level: 'error' }).entries.map((entry) => entry.msg)).to.deep.equal(['two failed']);
    expect(log.tail({ text: 'FAILED' }).entries.map((entry) => entry.msg)).to.deep.equal(['two failed']);
  });

  it('without a file, keeps the last lines in memory for the tail, bounded', () => {
    file = undefined;
    const log = tail({ memoryLines: 3 });
    for (let n = 0; n < 5; n++) write(line(30, `m${n}`));
    expect(log.tail({})).to.deep.equal({ entries: ['m2', 'm3', 'm4'].map((msg) => ({ level: 30, time: '2026-01-01T00:00:00.000Z', msg })), source: 'memory' });
    expect(log.tail({ lines: 1 }).entries.map((entry) => entry.msg)).to.deep.equal(['m4']);
  });

  it('reads a line that is not JSON as an info message, and an empty one as nothing', () => {
    expect(parseLine('plain words')).to.deep.equal({ level: 30, time: '', msg: 'plain words' });
    expect(parseLine('   ')).to.equal(undefined);
    expect(parseLine('null')).to.equal(undefined);
  });
});
