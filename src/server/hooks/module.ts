/**
 * The hooks ingress: POST <hooks.path>/<name> with a token of its own, mapped
 * to jobs, channel messages and session wake-ups. The ingress loads on its
 * first request: most daemons never receive one.
 */
import { defineModule } from '../kernel/module.ts';
import { secretFromEnv } from '../../shared/secrets/secret-store.ts';
import channelsModule from '../channels/module.ts';
import jobsModule from '../jobs/module.ts';
import sessionsModule from '../sessions/module.ts';
import type { HookFollower, HooksIngress } from './hooks-ingress.ts';
import { hooksDocument } from './document.ts';
import { hooksBase } from './hooks-path.ts';
import { mappingProblems } from './mapping-check.ts';
import { pruneRows } from '../store/retention.ts';
import { hooksToken } from './hooks-token.ts';

export type { HookFollower };
export { renderTemplate } from './template.ts';

/** What other modules get from this one. */
export interface Hooks {
  /** Adds a module's interest in hook requests (see HookFollower). */
  follow(follower: HookFollower): void;
}

export default defineModule<Hooks>({
  id: 'hooks',
  needs: [jobsModule, channelsModule, sessionsModule],
  migrations: [{
    version: 1,
    name: 'hook idempotency keys',
    was: { schema: 6 },
    sql: `
      CREATE TABLE hook_requests (
        hook TEXT NOT NULL,
        key TEXT NOT NULL,
        status INTEGER NOT NULL,
        body TEXT,
        created_at BIGINT NOT NULL,
        PRIMARY KEY (hook, key)
      );
      CREATE INDEX hook_requests_created ON hook_requests (created_at);
    `,
  }],
  async setup(ctx) {
    const { queue, handles, retention } = ctx.use(jobsModule);
    // An idempotency key is remembered as long as deliveries are: a request repeated after that runs again.
    retention('hookRequests', (retentionMs) => pruneRows(ctx.store, 'hook_requests', 'hook, key', 'created_at < ?', Date.now() - retentionMs));
    const { channels } = ctx.use(channelsModule);
    const sessions = ctx.use(sessionsModule).store;
    // A mapping that queues jobs nothing runs is refused when it is set, not failed at every call.
    ctx.configCheck((next) => mappingProblems(next, handles));

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

    const followers: HookFollower[] = [];
    let ingress: Promise<HooksIngress> | undefined;
    const load = () => import('./hooks-ingress.ts').then(({ HooksIngress: Ingress }) => new Ingress({
      config: ctx.config, queue, handles, channels, sessions, store: ctx.store, logger: ctx.log,
      emit: (event, payload, scope) => ctx.events.emit(event, payload, scope), followers: () => followers,
    }));
    // hooks.path applies at a restart: the route is fixed when the daemon starts.
    const base = hooksBase(ctx.config().hooks.path);
    ctx.http.fast({
      path: base,
      match: 'prefix',
      // hooks.enabled applies at once: a disabled ingress answers nothing but 404.
      enabled: () => ctx.config().hooks.enabled, methods: ['POST'],
      auth: { verify: hooksToken({ token: () => token, lockout: ctx.lockout, store: ctx.store }) },
      // An empty body is the empty payload.
      body: { types: ['application/json'], limit: () => ctx.config().hooks.maxBodyBytes, optional: true },
      handler: async ({ req, res, received }) => (await (ingress ??= load())).handle(req, res, received!),
    });
    ctx.http.document(hooksDocument(base));
    // A mail push names the mailbox and the point to sync from; the job's result records it.
    ctx.jobs.handle('gmail.push', (payload) => payload);
    return { follow: (follower) => void followers.push(follower) };
  },
});
