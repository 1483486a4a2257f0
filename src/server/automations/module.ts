/**
 * Automations: triggers (a schedule, a GitHub delivery, a hook) that run an
 * agent or send a message, exactly once per firing. A firing is a row keyed
 * by its automation and what fired it, made in one transaction with its job
 * (firing-maker.ts): of several daemons sharing a store one makes it, and a
 * daemon that stops runs it at its next start (or another daemon does). The
 * clock fires the scheduled ones (clock.ts), deliveries and hook requests the
 * others (triggers.ts). Its answer goes to the channel's outbox in the
 * transaction that records it (firing-run.ts), so a crash between the run
 * and the delivery delivers once.
 */
import { automationProblems } from '../../shared/automations.ts';
import agentsModule from '../agents/module.ts';
import channelsModule from '../channels/module.ts';
import hooksModule from '../hooks/module.ts';
import jobsModule from '../jobs/module.ts';
import { defineModule } from '../kernel/module.ts';
import sessionsModule from '../sessions/module.ts';
import webhooksModule from '../webhooks/module.ts';
import { AutomationClock } from './clock.ts';
import { AUTOMATION_JOB, FiringMaker } from './firing-maker.ts';
import { FiringRun } from './firing-run.ts';
import { AUTOMATION_MIGRATIONS, Firings } from './firings.ts';
import { scheduleTool } from './schedule-tool.ts';
import { Triggers } from './triggers.ts';
import { AutomationViews } from './views.ts';

export { AUTOMATION_JOB };

export default defineModule({
  id: 'automations',
  needs: [jobsModule, agentsModule, channelsModule, sessionsModule, webhooksModule, hooksModule],
  migrations: AUTOMATION_MIGRATIONS,
  setup(ctx) {
    const { store } = ctx;
    const firings = new Firings(store);
    const { queue, retention } = ctx.use(jobsModule);
    const sessions = ctx.use(sessionsModule);
    const agents = ctx.use(agentsModule);
    const { channels } = ctx.use(channelsModule);
    retention('automationFirings', (retentionMs) => firings.prune(retentionMs));
    const automations = () => ctx.config().automations;
    // Refused when set: an automation that could not fire or act (the daemon's own check, beside the CLI's).
    ctx.configCheck((next) => automationProblems(next));
    const maker = new FiringMaker(firings, queue);

    const clock = new AutomationClock({ store, firings, maker, log: ctx.log });
    ctx.watch.config((next) => void clock.sync(next));
    // Scheduled once the daemon is ready, not before: ten thousand automations take a moment to place on the clock.
    ctx.onStart(() => {
      clock.start();
      void clock.sync(ctx.config());
    });
    ctx.onStop(() => clock.stop());

    const triggers = new Triggers({ config: ctx.config, store, maker });
    ctx.use(webhooksModule).follow(triggers.deliveryFollower());
    ctx.use(hooksModule).follow(triggers.hookFollower());

    const firing = new FiringRun({
      automations, store, firings, reply: (item, db) => channels.reply(item, db), sessions: sessions.store, run: (request) => agents.run(request),
      emit: (event, payload) => ctx.events.emit(event, payload, 'operator.read'),
    });
    ctx.jobs.handle(AUTOMATION_JOB, (payload, context) => firing.handle(payload, context));

    const views = new AutomationViews({ automations, firings, jobs: queue, nextOf: (id) => clock.nextOf(id) });
    ctx.rpc.method({ name: 'automations.list', handler: (params) => views.list(params) });
    ctx.rpc.method({ name: 'automations.get', handler: ({ id }) => views.get(id) });
    ctx.rpc.method({ name: 'automations.runs', handler: ({ id, limit }) => views.runs(id, limit) });
    ctx.rpc.method({ name: 'automations.run', handler: ({ id }) => triggers.manual(id, views.existing(id)) });

    // An agent schedules for its user: a one-shot or a cron trigger, answered in the session it was asked in.
    ctx.tools.add(scheduleTool({ config: ctx.config, daemon: ctx.daemon, sessions: sessions.store, audit: (kind, fields) => store.audit(kind, fields), clock }));
  },
});
