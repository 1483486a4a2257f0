import { expect } from 'chai';
import pino from 'pino';
import { effectiveConfig } from '../../../../src/shared/config/keys.ts';
import type { GatewayConfig } from '../../../../src/shared/config/types.ts';
import { AutomationClock } from '../../../../src/server/automations/clock.ts';
import { FiringMaker } from '../../../../src/server/automations/firing-maker.ts';
import { Firings } from '../../../../src/server/automations/firings.ts';
import { JobQueue } from '../../../../src/server/jobs/job-queue.ts';
import { freshStore } from '../../../support/store.ts';

const HOUR = 3_600_000;
const T0 = Date.parse('2026-01-01T10:30:00Z');
const say = { message: { channel: 'irc', to: '#ops', text: 'tick' } };
const config = (automations: Record<string, unknown>): GatewayConfig => effectiveConfig({ automations });
const iso = (ms: number) => new Date(ms).toISOString();

describe('automations: the clock kept in line with the configuration', () => {
  const store = freshStore();
  let now: number;
  let warnings: string[];
  const clock = () => {
    const firings = new Firings(store());
    const log = pino({ level: 'warn' }, { write: (line: string) => void warnings.push(JSON.parse(line).msg) });
    return new AutomationClock({ store: store(), firings, maker: new FiringMaker(firings, new JobQueue(store())), log, now: () => now });
  };
  const made = async (automation: string) => (await new Firings(store()).recent(automation, 200)).map((row) => [iso(Number(row.scheduled_for)), row.fired_by]).reverse();
  const cursor = async (automation: string) => (await new Firings(store()).cursors()).get(automation);

  beforeEach(() => {
    now = T0;
    warnings = [];
  });

  it('puts a new scheduled automation on the clock from now, making nothing for the past', async () => {
    const first = clock();
    await first.sync(config({ hourly: { trigger: { every: '1h' }, action: say }, hooked: { trigger: { hook: 'x' }, action: say } }));
    expect(first.ids(), 'event triggers are not on the clock').to.deep.equal(['hourly']);
    expect(iso(first.nextOf('hourly')!)).to.equal('2026-01-01T11:00:00.000Z');
    expect(await cursor('hourly')).to.deep.equal({ spec: '{"every":"1h"}', at: T0 });
    expect(await made('hourly')).to.deep.equal([]);
  });

  it('after a stop, makes up for missed firings as catchUp says: the last, all, or none', async () => {
    const automations = {
      last: { trigger: { every: '1h' }, action: say },
      all: { trigger: { every: '1h' }, action: say, catchUp: 'all' },
      skip: { trigger: { every: '1h' }, action: say, catchUp: 'skip' },
    };
    await clock().sync(config(automations));
    now = T0 + 3 * HOUR;
    const restarted = clock();
    await restarted.sync(config(automations));
    expect(await made('last')).to.deep.equal([['2026-01-01T13:00:00.000Z', 'catch-up']]);
    expect(await made('all')).to.deep.equal([['2026-01-01T11:00:00.000Z', 'catch-up'], ['2026-01-01T12:00:00.000Z', 'catch-up'], ['2026-01-01T13:00:00.000Z', 'catch-up']]);
    expect(await made('skip')).to.deep.equal([]);
    for (const id of ['last', 'all', 'skip']) expect((await cursor(id))!.at, id).to.equal(now);
    expect(iso(restarted.nextOf('all')!)).to.equal('2026-01-01T14:00:00.000Z');
    // Started again at once: nothing more to make up for.
    await clock().sync(config(automations));
    expect(await made('all')).to.have.length(3);
  });

  it('a changed trigger starts afresh: nothing is made up for under the old one', async () => {
    await clock().sync(config({ report: { trigger: { every: '1h' }, action: say } }));
    now = T0 + 5 * HOUR;
    await clock().sync(config({ report: { trigger: { every: '2h' }, action: say } }));
    expect(await made('report')).to.deep.equal([]);
    expect(await cursor('report')).to.deep.equal({ spec: '{"every":"2h"}', at: now });
  });

  it('a disabled or removed automation leaves the clock and forgets where it was', async () => {
    const running = clock();
    await running.sync(config({ a: { trigger: { every: '1h' }, action: say }, b: { trigger: { every: '1h' }, action: say } }));
    await running.sync(config({ a: { enabled: false, trigger: { every: '1h' }, action: say } }));
    expect(running.ids()).to.deep.equal([]);
    expect(running.nextOf('a')).to.equal(undefined);
    expect(await cursor('a')).to.equal(undefined);
    expect(await cursor('b')).to.equal(undefined);
    // Enabled again later, it starts from then.
    now = T0 + 4 * HOUR;
    await running.sync(config({ a: { trigger: { every: '1h' }, action: say } }));
    expect(await made('a')).to.deep.equal([]);
  });

  it('makes the firings that came due, each once whoever makes it, moving each cursor forward', async () => {
    const running = clock();
    await running.sync(config({ a: { trigger: { every: '1h' }, action: say } }));
    const due = [{ automation: 'a', spec: '{"every":"1h"}', scheduledFor: T0 + HOUR / 2 }];
    await running.fire(due);
    await clock().fire(due);
    expect(await made('a')).to.deep.equal([['2026-01-01T11:00:00.000Z', 'schedule']]);
    expect((await cursor('a'))!.at).to.equal(T0 + HOUR / 2);
    // A cursor never moves back.
    await running.fire([{ automation: 'a', spec: '{"every":"1h"}', scheduledFor: T0 - HOUR }]);
    expect((await cursor('a'))!.at).to.equal(T0 + HOUR / 2);
  });

  it('a trigger that cannot be scheduled is left off the clock and said in the log; the others are scheduled', async () => {
    const running = clock();
    await running.sync(config({ broken: { trigger: { every: 'often' }, action: say }, fine: { trigger: { every: '1d' }, action: say } }));
    expect(running.ids()).to.deep.equal(['fine']);
    expect(warnings).to.include('automation trigger cannot be scheduled');
  });

  it('a one-shot that has passed stays on the clock with nothing to come', async () => {
    const running = clock();
    await running.sync(config({ once: { trigger: { at: '2026-01-01T09:00:00Z' }, action: say }, soon: { trigger: { at: '2026-01-01T12:00:00+01:00' }, action: say } }));
    expect(running.nextOf('once')).to.equal(undefined);
    expect(iso(running.nextOf('soon')!)).to.equal('2026-01-01T11:00:00.000Z');
  });
});
