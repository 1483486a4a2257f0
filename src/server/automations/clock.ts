/**
 * The scheduled automations' clock, kept in line with the configuration:
 * new and changed scheduled automations start now; those a cursor of the
 * same spec already knows (the daemon stopped, or another daemon runs them
 * too) make up for missed firings as their catchUp says; due firings are
 * made together, each moving its automation's cursor.
 */
import type { Logger } from 'pino';
import { MAX_CATCH_UP, Schedule } from '../../shared/automations.ts';
import type { GatewayConfig } from '../../shared/config/types.ts';
import type { Store } from '../store/database.ts';
import type { FiringMaker, NewFiring } from './firing-maker.ts';
import type { Firings } from './firings.ts';
import { type Due, Scheduler } from './scheduler.ts';
import { iso, scheduled, specOf } from './triggers.ts';

export interface ClockDeps {
  store: Store;
  firings: Firings;
  maker: FiringMaker;
  log: Logger;
  now?: () => number;
}

export class AutomationClock {
  private readonly deps: ClockDeps;
  private readonly now: () => number;
  private readonly scheduler: Scheduler;
  private syncing: Promise<void> = Promise.resolve();

  constructor(deps: ClockDeps) {
    this.deps = deps;
    this.now = deps.now ?? Date.now;
    this.scheduler = new Scheduler({ log: deps.log, now: this.now, fire: (due) => this.fire(due) });
  }

  start(): void {
    this.scheduler.start();
  }

  stop(): void {
    this.scheduler.stop();
  }

  /** When an automation fires next, if it is on the clock and has a firing to come. */
  nextOf(id: string): number | undefined {
    return this.scheduler.nextOf(id);
  }

  /** The automations on the clock. */
  ids(): string[] {
    return this.scheduler.ids();
  }

  /** Brings the clock in line with a configuration, after any sync under way; a failure is logged. */
  sync(config: GatewayConfig): Promise<void> {
    this.syncing = this.syncing.then(() => this.syncNow(config)).catch((error: unknown) => this.deps.log.warn({ err: error }, 'automations could not be scheduled'));
    return this.syncing;
  }

  /** Makes the firings that came due, each moving its automation's cursor. */
  async fire(due: readonly Due[]): Promise<void> {
    await this.deps.store.transaction(async (tx) => {
      await this.deps.maker.make(tx, due.map((firing) => ({ automation: firing.automation, key: String(firing.scheduledFor), scheduledFor: firing.scheduledFor, firedBy: 'schedule' as const })));
      for (const firing of due) await this.deps.firings.advance(tx, firing.automation, firing.spec, firing.scheduledFor);
    });
  }

  private async syncNow(config: GatewayConfig): Promise<void> {
    const { store, firings, maker, log } = this.deps;
    const { scheduler } = this;
    const wanted = Object.entries(config.automations).filter(([, settings]) => scheduled(settings));
    const wantedIds = new Set(wanted.map(([id]) => id));
    const gone = scheduler.ids().filter((id) => !wantedIds.has(id));
    for (const id of gone) scheduler.remove(id);
    // A disabled or removed automation forgets where it was: enabled again, it starts from then, not from before.
    await firings.forget(gone);
    const changed = wanted.filter(([id, settings]) => scheduler.specOf(id) !== specOf(settings));
    if (!changed.length) return;
    const now = this.now();
    const cursors = await firings.cursors();
    const fresh = changed.filter(([id, settings]) => cursors.get(id)?.spec !== specOf(settings));
    if (fresh.length) {
      await store.transaction(async (tx) => {
        for (const [id, settings] of fresh) await firings.begin(tx, id, specOf(settings), now);
      });
    }
    const missed: (NewFiring & { spec: string })[] = [];
    for (const [index, [id, settings]] of changed.entries()) {
      // Working out thousands of next firings, the daemon still answers in between.
      if (index % 500 === 499) await new Promise((resolve) => setImmediate(resolve));
      let schedule: Schedule;
      try {
        schedule = new Schedule(settings.trigger);
      } catch (error) {
        log.warn({ automation: id, err: error }, 'automation trigger cannot be scheduled');
        continue;
      }
      const cursor = cursors.get(id);
      if (cursor?.spec === specOf(settings) && settings.catchUp !== 'skip') {
        const count = settings.catchUp === 'all' ? MAX_CATCH_UP : 1;
        const times = schedule.latest(cursor.at, now, count);
        for (const at of times) missed.push({ automation: id, key: String(at), scheduledFor: at, firedBy: 'catch-up', spec: specOf(settings) });
        if (times.length) log.info({ automation: id, firings: times.length, since: iso(cursor.at) }, 'automation makes up for firings missed while no daemon ran');
      }
      scheduler.set(id, specOf(settings), schedule, now);
    }
    if (missed.length) {
      await store.transaction(async (tx) => {
        await maker.make(tx, missed);
        for (const firing of missed) await firings.advance(tx, firing.automation, firing.spec, firing.scheduledFor);
      });
    }
    // The cursors of the changed ones that missed nothing move to now, so a stop later does not count from before.
    await store.transaction(async (tx) => {
      for (const [id, settings] of changed) await firings.advance(tx, id, specOf(settings), now);
    });
  }
}
