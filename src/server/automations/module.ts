/**
 * Automations: triggers (a schedule, a GitHub delivery, a hook) that run an
 * agent or send a message, exactly once per firing. A firing is a row keyed
 * by its automation and what fired it, made in one transaction with its job:
 * of several daemons sharing a store one makes it, and a daemon that stops
 * runs it at its next start (or another daemon does). Its answer goes to the
 * channel's outbox in the transaction that records it, so a crash between the
 * run and the delivery delivers once.
 */
import { randomUUID } from 'node:crypto';
import {
  automationProblems, describeTrigger, isScheduled, MAX_CATCH_UP, Schedule,
} from '../../shared/automations.ts';
import type { AutomationSettings, GatewayConfig } from '../../shared/config/types.ts';
import { changeConfigKeys, loadConfig } from '../../shared/config/profile-config.ts';
import type { AutomationRun, AutomationView, JobStatus } from '../../shared/protocol/results.ts';
import agentsModule from '../agents/module.ts';
import channelsModule from '../channels/module.ts';
import hooksModule, { renderTemplate } from '../hooks/module.ts';
import jobsModule from '../jobs/module.ts';
import { DomainError } from '../kernel/errors.ts';
import { defineModule } from '../kernel/module.ts';
import { automationPerson } from '../kernel/person.ts';
import sessionsModule from '../sessions/module.ts';
import type { Db, Tx } from '../store/database.ts';
import webhooksModule from '../webhooks/module.ts';
import { AUTOMATION_MIGRATIONS, type FiringRow, Firings } from './firings.ts';
import { type Due, Scheduler } from './scheduler.ts';

export const AUTOMATION_JOB = 'automation.run';
const MAX_ATTEMPTS = 5;

type FiredBy = 'schedule' | 'catch-up' | 'webhook' | 'hook' | 'manual';

/** What a firing's job carries. */
interface FiringPayload {
  automation: string;
  key: string;
  scheduledFor: number;
  /** The fields its templates read from. */
  fields: Record<string, unknown>;
}

const iso = (ms: number | null | undefined) => (ms === null || ms === undefined ? null : new Date(Number(ms)).toISOString());
/** A trigger's spec: a cursor and a schedule belong to one spec, and a changed trigger starts afresh. */
const specOf = (settings: AutomationSettings) => JSON.stringify(settings.trigger);
const scheduled = (settings: AutomationSettings) => settings.enabled && isScheduled(settings.trigger);

export default defineModule({
  id: 'automations',
  needs: [jobsModule, agentsModule, channelsModule, sessionsModule, webhooksModule, hooksModule],
  migrations: AUTOMATION_MIGRATIONS,
  setup(ctx) {
    const { store } = ctx;
    const firings = new Firings(store);
    const { queue, retention } = ctx.use(jobsModule);
    const agents = ctx.use(agentsModule);
    const { channels } = ctx.use(channelsModule);
    const sessions = ctx.use(sessionsModule);
    retention('automationFirings', (retentionMs) => firings.prune(retentionMs));
    const automations = () => ctx.config().automations;
    // Refused when set: an automation that could not fire or act (the daemon's own check, beside the CLI's).
    ctx.configCheck((next) => automationProblems(next));

    /** Makes firings in the caller's transaction: each key once, its job with it; says which were new. */
    const makeFirings = async (tx: Tx | Db, list: { automation: string; key: string; scheduledFor: number; firedBy: FiredBy; fields?: Record<string, unknown> }[]) => {
      const made: { automation: string; key: string; jobId: string; fresh: boolean }[] = [];
      for (const firing of list) {
        const jobId = queue.newId();
        const fresh = await firings.claim(tx, { automation: firing.automation, key: firing.key, scheduledFor: firing.scheduledFor, jobId, firedBy: firing.firedBy });
        if (fresh) {
          const payload: FiringPayload = {
            automation: firing.automation, key: firing.key, scheduledFor: firing.scheduledFor,
            fields: { automation: firing.automation, firedBy: firing.firedBy, scheduledFor: new Date(firing.scheduledFor).toISOString(), ...firing.fields },
          };
          await queue.enqueue({ id: jobId, kind: AUTOMATION_JOB, payload, source: `automation:${firing.automation}`, maxAttempts: MAX_ATTEMPTS, runAt: firing.scheduledFor }, tx);
        }
        made.push({ automation: firing.automation, key: firing.key, jobId: fresh ? jobId : (await firings.get(firing.automation, firing.key, tx))!.job_id, fresh });
      }
      return made;
    };

    // The clock: due firings are made together, each moving its automation's cursor.
    const scheduler = new Scheduler({
      log: ctx.log,
      fire: async (due: Due[]) => {
        await store.transaction(async (tx) => {
          await makeFirings(tx, due.map((firing) => ({ automation: firing.automation, key: String(firing.scheduledFor), scheduledFor: firing.scheduledFor, firedBy: 'schedule' as const })));
          for (const firing of due) await firings.advance(tx, firing.automation, firing.spec, firing.scheduledFor);
        });
      },
    });

    /**
     * Brings the clock in line with the configuration: new and changed
     * scheduled automations start now; those a cursor of the same spec
     * already knows (the daemon stopped, or another daemon runs them too)
     * make up for missed firings as their catchUp says.
     */
    let syncing: Promise<void> = Promise.resolve();
    const sync = (config: GatewayConfig) => {
      syncing = syncing.then(() => syncNow(config)).catch((error: unknown) => ctx.log.warn({ err: error }, 'automations could not be scheduled'));
      return syncing;
    };
    const syncNow = async (config: GatewayConfig) => {
      const wanted = Object.entries(config.automations).filter(([, settings]) => scheduled(settings));
      const wantedIds = new Set(wanted.map(([id]) => id));
      const gone = scheduler.ids().filter((id) => !wantedIds.has(id));
      for (const id of gone) scheduler.remove(id);
      // A disabled or removed automation forgets where it was: enabled again, it starts from then, not from before.
      await firings.forget(gone);
      const changed = wanted.filter(([id, settings]) => scheduler.specOf(id) !== specOf(settings));
      if (!changed.length) return;
      const now = Date.now();
      const cursors = await firings.cursors();
      const fresh = changed.filter(([id, settings]) => cursors.get(id)?.spec !== specOf(settings));
      if (fresh.length) {
        await store.transaction(async (tx) => {
          for (const [id, settings] of fresh) await firings.begin(tx, id, specOf(settings), now);
        });
      }
      const missed: { automation: string; key: string; scheduledFor: number; firedBy: FiredBy; spec: string }[] = [];
      for (const [index, [id, settings]] of changed.entries()) {
        // Working out thousands of next firings, the daemon still answers in between.
        if (index % 500 === 499) await new Promise((resolve) => setImmediate(resolve));
        let schedule: Schedule;
        try {
          schedule = new Schedule(settings.trigger);
        } catch (error) {
          ctx.log.warn({ automation: id, err: error }, 'automation trigger cannot be scheduled');
          continue;
        }
        const cursor = cursors.get(id);
        if (cursor?.spec === specOf(settings) && settings.catchUp !== 'skip') {
          const count = settings.catchUp === 'all' ? MAX_CATCH_UP : 1;
          const times = schedule.latest(cursor.at, now, count);
          for (const at of times) missed.push({ automation: id, key: String(at), scheduledFor: at, firedBy: 'catch-up', spec: specOf(settings) });
          if (times.length) ctx.log.info({ automation: id, firings: times.length, since: iso(cursor.at) }, 'automation makes up for firings missed while no daemon ran');
        }
        scheduler.set(id, specOf(settings), schedule, now);
      }
      if (missed.length) {
        await store.transaction(async (tx) => {
          await makeFirings(tx, missed);
          for (const firing of missed) await firings.advance(tx, firing.automation, firing.spec, firing.scheduledFor);
        });
      }
      // The cursors of the changed ones that missed nothing move to now, so a stop later does not count from before.
      await store.transaction(async (tx) => {
        for (const [id, settings] of changed) await firings.advance(tx, id, specOf(settings), now);
      });
    };
    ctx.watch.config((next) => void sync(next));
    // Scheduled once the daemon is ready, not before: ten thousand automations take a moment to place on the clock.
    ctx.onStart(() => {
      scheduler.start();
      void sync(ctx.config());
    });
    ctx.onStop(() => scheduler.stop());

    // GitHub deliveries that match a webhook trigger fire it, in the transaction that records them.
    const matchesDelivery = (settings: AutomationSettings, event: string, body: Record<string, any>) => {
      const want = settings.trigger.webhook;
      if (!settings.enabled || !want || want.event !== event) return false;
      if (want.action !== undefined && body.action !== want.action) return false;
      if (want.repository !== undefined && String(body.repository?.full_name ?? '').toLowerCase() !== want.repository.toLowerCase()) return false;
      return want.ref === undefined || body.ref === want.ref;
    };
    // What the enabled event triggers listen for, worked out once per configuration: asked of every delivery and hook request.
    let listening: { config: GatewayConfig; events: Set<string>; hooks: Set<string> } | undefined;
    const listens = () => {
      const config = ctx.config();
      if (listening?.config !== config) {
        const enabled = Object.values(config.automations).filter((settings) => settings.enabled);
        listening = {
          config, events: new Set(enabled.flatMap((settings) => (settings.trigger.webhook ? [settings.trigger.webhook.event] : []))),
          hooks: new Set(enabled.flatMap((settings) => (settings.trigger.hook ? [settings.trigger.hook] : []))),
        };
      }
      return listening;
    };
    ctx.use(webhooksModule).follow({
      wants: (event) => listens().events.has(event),
      follow: async (deliveries, tx) => {
        const list = deliveries.flatMap((delivery) => Object.entries(automations())
          .filter(([, settings]) => matchesDelivery(settings, delivery.event, delivery.body))
          .map(([id]) => ({
            automation: id, key: `delivery-${delivery.hookId ?? ''}-${delivery.deliveryId}`, scheduledFor: Date.now(), firedBy: 'webhook' as const,
            fields: {
              event: delivery.event, delivery: delivery.deliveryId, action: delivery.body.action ?? null, repository: (delivery.body.repository as any)?.full_name ?? null,
              ref: delivery.body.ref ?? null, sender: (delivery.body.sender as any)?.login ?? null, payload: delivery.body,
            },
          })));
        if (list.length) await makeFirings(tx, list);
      },
    });
    // Requests to a hook a trigger names fire it; a repeated Idempotency-Key fires it once.
    ctx.use(hooksModule).follow({
      wants: (name) => listens().hooks.has(name),
      fire: async (name, payload, key) => {
        const ids = Object.entries(automations()).filter(([, settings]) => settings.enabled && settings.trigger.hook === name).map(([id]) => id);
        const firingKey = `hook-${key ?? randomUUID()}`;
        const made = await store.transaction((tx) => makeFirings(tx, ids.map((id) => ({
          automation: id, key: firingKey, scheduledFor: Date.now(), firedBy: 'hook' as const, fields: { hook: name, payload },
        }))));
        return made.map((firing) => ({ action: 'automation', automation: firing.automation, jobId: firing.jobId }));
      },
    });

    /** Where an answer goes, as the channel's outbox takes it. */
    const destination = async (settings: AutomationSettings, sessionKey: string | undefined): Promise<{ channel: string; account: string; to: string; sessionKey?: string } | undefined> => {
      const { deliver, message } = settings.action;
      const target = message ?? (typeof deliver === 'object' ? deliver : undefined);
      if (target) return { channel: target.channel, account: target.account ?? 'default', to: target.to };
      if (deliver !== 'session' || !sessionKey) return undefined;
      const session = await sessions.store.get(sessionKey);
      if (!session) throw new DomainError('not_found', `No session ${sessionKey} to deliver to.`);
      return { channel: session.channel, account: session.account, to: session.peer, sessionKey };
    };

    ctx.jobs.handle(AUTOMATION_JOB, async (raw, { attempt }) => {
      const firing = raw as FiringPayload;
      const settings = Object.hasOwn(automations(), firing.automation) ? automations()[firing.automation] : undefined;
      // Changed since it fired: a removed or disabled automation does nothing, and says so in its runs.
      if (!settings || !settings.enabled) {
        const why = settings ? 'the automation was disabled before it ran' : 'the automation was removed before it ran';
        await firings.skip(firing.automation, firing.key, why);
        return { skipped: why };
      }
      await firings.started(firing.automation, firing.key, Date.now());
      // An earlier attempt ran and delivered, then lost its daemon before it could say so: that answer stands.
      const earlier = attempt > 1 ? await firings.get(firing.automation, firing.key) : undefined;
      if (earlier?.answer !== null && earlier?.answer !== undefined) return resultOf(earlier);
      ctx.events.emit('automations.fired', { automation: firing.automation, key: firing.key, scheduledFor: iso(firing.scheduledFor) }, 'operator.read');
      const outboxKey = `automation:${firing.automation}:${firing.key}`;
      if (settings.action.message) {
        const text = renderTemplate(settings.action.message.text, firing.fields);
        if (!text.trim()) throw new DomainError('invalid', `The message of automation ${firing.automation} is empty once filled from its trigger.`);
        const to = (await destination(settings, undefined))!;
        await store.transaction(async (tx) => {
          await channels.reply({ ...to, text, key: outboxKey }, tx);
          await firings.finished(tx, firing.automation, firing.key, { runId: null, text, usage: null, deliveredTo: `${to.channel}:${to.account}:${to.to}` });
        });
        return { text, deliveredTo: `${to.channel}:${to.account}:${to.to}` };
      }
      const { action } = settings;
      const sessionKey = action.session && action.session !== 'isolated' ? action.session : undefined;
      const prompt = renderTemplate(action.prompt ?? '', firing.fields);
      if (!prompt.trim()) throw new DomainError('invalid', `The prompt of automation ${firing.automation} is empty once filled from its trigger.`);
      const existing = sessionKey ? await sessions.store.get(sessionKey) : undefined;
      if (sessionKey && !existing) throw new DomainError('not_found', `Automation ${firing.automation} continues session ${sessionKey}, which does not exist (gateway sessions list).`);
      const to = await destination(settings, sessionKey);
      const outcome = await agents.run({
        agentId: action.agent, text: prompt, surface: 'automation', subject: `automation:${firing.automation}`,
        // The automation acts for itself; its prompt is its own words only in a session of its own, not in one it continues.
        person: automationPerson(firing.automation),
        sender: { id: `automation:${firing.automation}`, name: firing.automation, ...(sessionKey ? {} : { person: automationPerson(firing.automation) }) },
        session: sessionKey ? { key: sessionKey } : { channel: 'automation', account: firing.automation, kind: 'direct', peer: firing.key },
      });
      if (outcome.status !== 'succeeded') throw new DomainError('unavailable', `The run ${outcome.runId} ended ${outcome.status}${outcome.error ? `: ${outcome.error}` : ''}.`);
      const usage = outcome.usage as Record<string, number>;
      const deliveredTo = to && outcome.text.trim() ? `${to.channel}:${to.account}:${to.to}` : null;
      await store.transaction(async (tx) => {
        if (to && deliveredTo) await channels.reply({ ...to, text: outcome.text, key: outboxKey, runId: outcome.runId, ...(to.sessionKey ? { sessionKey: to.sessionKey } : {}) }, tx);
        await firings.finished(tx, firing.automation, firing.key, { runId: outcome.runId, text: outcome.text, usage, deliveredTo });
      });
      return { runId: outcome.runId, text: outcome.text, usage, deliveredTo };
    });

    const resultOf = (row: FiringRow) => ({ runId: row.run_id, text: row.answer, usage: row.usage ? JSON.parse(row.usage) : null, deliveredTo: row.delivered_to });

    const existing = (id: string): AutomationSettings => {
      const settings = Object.hasOwn(automations(), id) ? automations()[id] : undefined;
      if (!settings) throw new DomainError('not_found', `No automation ${id} (automations: ${Object.keys(automations()).join(', ') || 'none'}).`, { code: 'automation_not_found' });
      return settings;
    };
    const runView = async (row: FiringRow): Promise<AutomationRun> => {
      const job = await queue.get(row.job_id);
      return {
        key: row.firing_key, firedBy: row.fired_by as AutomationRun['firedBy'], jobId: row.job_id, state: (job?.status ?? 'succeeded') as JobStatus, attempts: job?.attempts ?? 0,
        scheduledFor: iso(row.scheduled_for)!, firedAt: iso(row.fired_at), runId: row.run_id, text: row.answer,
        usage: row.usage ? JSON.parse(row.usage) : null, deliveredTo: row.delivered_to, error: job?.status === 'succeeded' ? null : (job?.error ?? null), skipped: row.skipped,
      };
    };
    /** A view for a list: a long prompt or message cut, so a page of them stays one frame. */
    const brief = (automation: AutomationView): AutomationView => {
      const cut = (text: unknown) => (typeof text === 'string' && text.length > 200 ? `${text.slice(0, 199)}…` : text);
      const { prompt, message } = automation.action as { prompt?: string; message?: { text: string } };
      return { ...automation, action: { ...automation.action, ...(prompt ? { prompt: cut(prompt) } : {}), ...(message ? { message: { ...message, text: cut(message.text) } } : {}) } };
    };
    const view = async (id: string, settings: AutomationSettings, last: FiringRow | undefined): Promise<AutomationView> => ({
      id, description: settings.description ?? null, enabled: settings.enabled, trigger: { ...settings.trigger }, when: describeTrigger(settings.trigger),
      action: { ...settings.action }, catchUp: settings.catchUp, nextAt: iso(scheduled(settings) ? scheduler.nextOf(id) : undefined),
      last: last ? await runView(last) : null,
    });

    ctx.rpc.method({
      name: 'automations.list',
      handler: async ({ limit = 200, cursor }) => {
        const ids = Object.keys(automations()).sort().filter((id) => cursor === undefined || id > cursor);
        const page = ids.slice(0, limit);
        const latest = await firings.latest(page);
        const views = await Promise.all(page.map((id) => view(id, automations()[id]!, latest.get(id))));
        return { automations: views.map(brief), nextCursor: ids.length > limit ? page.at(-1)! : null };
      },
    });
    ctx.rpc.method({ name: 'automations.get', handler: async ({ id }) => view(id, existing(id), (await firings.recent(id, 1))[0]) });
    ctx.rpc.method({
      name: 'automations.runs',
      handler: async ({ id, limit }) => {
        existing(id);
        return { automation: id, runs: await Promise.all((await firings.recent(id, limit ?? 20)).map(runView)) };
      },
    });
    ctx.rpc.method({
      name: 'automations.run',
      handler: async ({ id }) => {
        const settings = existing(id);
        if (!settings.enabled) throw new DomainError('conflict', `Automation ${id} is disabled: gateway automations enable ${id}`);
        const key = `manual-${Date.now()}-${randomUUID().slice(0, 8)}`;
        const [made] = await store.transaction((tx) => makeFirings(tx, [{ automation: id, key, scheduledFor: Date.now(), firedBy: 'manual' }]));
        return { automation: id, key, jobId: made!.jobId };
      },
    });

    // An agent schedules for its user: a one-shot or a cron trigger, answered in the session it was asked in.
    ctx.tools.add({
      name: 'automations.add',
      description: 'Schedule a prompt for yourself: at a time (at, ISO 8601 with an offset) or on a cron expression (cron, with tz); the answer comes back in this conversation.',
      inputSchema: {
        type: 'object', additionalProperties: false, required: ['prompt'],
        properties: {
          prompt: { type: 'string', minLength: 1, maxLength: 4000 },
          at: { type: 'string', format: 'date-time' },
          cron: { type: 'string', minLength: 1, maxLength: 200 },
          tz: { type: 'string', minLength: 1, maxLength: 64 },
          description: { type: 'string', maxLength: 500 },
        },
      },
      handler: async (args, context) => {
        if (context.surface !== 'agent' || !context.sessionKey) throw new DomainError('forbidden', 'automations.add schedules for an agent\'s conversation; call it from an agent run.');
        const session = await sessions.store.get(context.sessionKey);
        const agentId = context.agent;
        if (!session || !agentId) throw new DomainError('forbidden', 'automations.add needs the agent and the session it is called from.');
        if ((args.at === undefined) === (args.cron === undefined)) throw new DomainError('invalid', 'Give either at (one time) or cron (a repeating schedule).');
        const id = `${agentId.slice(0, 12)}-${Date.now().toString(36)}${randomUUID().slice(0, 4)}`;
        const deliverable = Boolean(ctx.config().channels[session.channel]);
        const settings = {
          ...(args.description ? { description: String(args.description) } : {}),
          trigger: args.at !== undefined ? { at: String(args.at) } : { cron: String(args.cron), ...(args.tz ? { tz: String(args.tz) } : {}) },
          action: { agent: agentId, prompt: String(args.prompt), session: context.sessionKey, ...(deliverable ? { deliver: 'session' } : {}) },
        };
        const key = `automations.${id}`;
        const before = new Set(ctx.daemon.configProblems(ctx.config()));
        const [change] = await changeConfigKeys(ctx.daemon.paths, [{ key, value: settings }], { check: (next) => ctx.daemon.configProblems(next).filter((problem) => !before.has(problem)) });
        if (!change?.remainingProblems) ctx.daemon.applyConfig(loadConfig(ctx.daemon.paths).effective);
        await store.audit('config.changed', { actor: context.caller, subject: key });
        await sync(ctx.config());
        return { automation: id, when: describeTrigger(settings.trigger), nextAt: iso(scheduler.nextOf(id)) };
      },
    });
  },
});
