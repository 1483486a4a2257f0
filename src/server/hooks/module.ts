/**
 * The hooks ingress: POST <hooks.path>/<name> with a token of its own, mapped
 * to jobs, channel messages and session wake-ups. The ingress loads on its
 * first request: most daemons never receive one.
 */
import { RequestBudget } from '../auth/throttle.ts';
import { sendError } from '../kernel/answer.ts';
import { defineModule } from '../kernel/module.ts';
import { secretFromEnv } from '../../shared/secrets/secret-store.ts';
import channelsModule from '../channels/module.ts';
import jobsModule from '../jobs/module.ts';
import sessionsModule from '../sessions/module.ts';
import type { HooksIngress } from './hooks-ingress.ts';
import { hooksBase } from './hooks-path.ts';

export default defineModule({
  id: 'hooks',
  needs: [jobsModule, channelsModule, sessionsModule],
  async setup(ctx) {
    const { queue, handles } = ctx.use(jobsModule);
    const { channels } = ctx.use(channelsModule);
    const sessions = ctx.use(sessionsModule).store;
    // A mapping that queues jobs nothing runs is refused when it is set, not failed at every call.
    ctx.configCheck((next) => next.hooks.mappings.flatMap((mapping, index) => {
      const kind = mapping.kind ?? `hooks.${mapping.name}`;
      return mapping.action === 'job' && !handles(kind) ? [`hooks.mappings.${index} (${mapping.name}): no handler runs jobs of kind ${kind}`] : [];
    }));

    // The hooks token: the environment first, then the store; one equal to the gateway token is warned about.
    let token: string | undefined;
    const loadToken = async () => {
      token = secretFromEnv('hooks.token') ?? (await ctx.secrets.get('hooks.token'));
      if (token && ctx.credential.mode !== 'none' && ctx.credential.verifyBearer(token)) {
        ctx.log.warn('hooks.token equals the gateway token; give hooks a token of their own: gateway hooks token set');
      }
    };
    await loadToken();
    ctx.watch.secrets(['hooks.token', 'gateway.token'], loadToken);

    let ingress: Promise<HooksIngress> | undefined;
    const load = () => import('./hooks-ingress.ts').then(({ HooksIngress: Ingress }) => new Ingress({
      config: ctx.config, token: () => token, lockout: ctx.lockout, queue, handles, channels, sessions, store: ctx.store, logger: ctx.log,
      budget: new RequestBudget(ctx.config().gateway.rateLimit.max, ctx.config().gateway.rateLimit.windowMs),
      emit: (event, payload, scope) => ctx.events.emit(event, payload, scope),
    }));
    // hooks.path applies at a restart: the route is fixed when the daemon starts.
    ctx.http.fast({
      path: hooksBase(ctx.config().hooks.path),
      match: 'prefix',
      handler: (req, res) => {
        ingress ??= load();
        ingress.then((loaded) => loaded.handle(req, res), (error: unknown) => sendError(res, error, (failure) => ctx.log.error({ err: failure }, 'the hooks ingress failed to load')));
      },
    });
    // A mail push names the mailbox and the point to sync from; the job's result records it.
    ctx.jobs.handle('gmail.push', (payload) => payload);
  },
});
