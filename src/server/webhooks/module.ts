/**
 * Webhook ingestion: POST /webhooks answered before the HTTP application loads,
 * each delivery committed with its job before the answer; the built-in
 * handlers of those jobs; the webhook secret, read again when it changes.
 */
import { RequestBudget } from '../auth/throttle.ts';
import { errorResponse, jsonResponse } from '../kernel/api-doc.ts';
import { defineModule } from '../kernel/module.ts';
import { secretFromEnv } from '../../shared/secrets/secret-store.ts';
import jobsModule from '../jobs/module.ts';
import { type AcceptGroup, acceptDeliveries, type DeliveryFollower, pruneDeliveries } from './deliveries.ts';
import { registerGithubHandlers } from './github-handlers.ts';
import { WEBHOOK_MIGRATIONS } from './migrations.ts';
import { DELIVERY_BODY, WebhookIngress } from './ingress.ts';
import { THREAD_GROUP, WebhookThread } from './thread-client.ts';

/** Groups of deliveries being written to PostgreSQL at once (see DeliveryIntake). */
const POSTGRES_GROUPS_IN_FLIGHT = 4;

export type { DeliveryFollower };

/** What other modules get from this one. */
export interface Webhooks {
  /** Adds a module's interest in new deliveries (see DeliveryFollower). */
  follow(follower: DeliveryFollower): void;
}

export default defineModule<Webhooks>({
  id: 'webhooks',
  needs: [jobsModule],
  migrations: WEBHOOK_MIGRATIONS,
  async setup(ctx) {
    const { queue, retention, runAtOnce } = ctx.use(jobsModule);
    retention('deliveries', (retentionMs) => pruneDeliveries(ctx.store, retentionMs));
    // The current secret and, during rotation, the previous one: the environment first, then the store.
    let secrets: string[] = [];
    const loadSecrets = async () => {
      const current = secretFromEnv('webhooks.github.secret') ?? (await ctx.secrets.get('webhooks.github.secret'));
      const previous = await ctx.secrets.get('webhooks.github.secret.previous');
      secrets = [current, previous].filter((value): value is string => Boolean(value));
    };
    await loadSecrets();
    ctx.watch.secrets(['webhooks.github.secret*'], loadSecrets);

    // On SQLite, deliveries are parsed, checked and written, and their jobs run, on a thread of their own (thread-client.ts), once one comes.
    const { store } = ctx;
    const thread = !store.dialect.shared
      ? new WebhookThread({
        store, queue, logger: ctx.log,
        settings: () => ({
          path: ctx.daemon.paths.db, synchronous: ctx.config().store.synchronous, owner: ctx.daemon.instanceId,
          leaseMs: ctx.config().jobs.leaseSeconds * 1000, concurrency: ctx.config().jobs.concurrency,
        }),
      })
      : undefined;
    // Recorded on this thread, a delivery's job makes its first attempt in the delivery's own transaction when it can.
    const followers: DeliveryFollower[] = [];
    const here = (deliveries: Parameters<AcceptGroup>[0]) => acceptDeliveries(store, queue, deliveries, runAtOnce, followers);
    // A delivery another module follows (an automation's trigger) is recorded here, where the follower is, with what it queues.
    const followed = (deliveries: Parameters<AcceptGroup>[0]) => followers.length > 0 && deliveries.some((delivery) => followers.some((follower) => follower.wants(delivery.event)));
    const accept: AcceptGroup = (deliveries) => (thread && !followed(deliveries) ? thread.route(deliveries, here) : here(deliveries));
    ctx.onStop((deadline) => thread?.stop(deadline));

    const { rateLimit } = ctx.config().gateway;
    const ingress = new WebhookIngress({
      // The thread writes while this one reads: groups of at most THREAD_GROUP keep both busy at once. On PostgreSQL a
      // few groups are written at once, each a few round trips, and what arrives meanwhile waits to leave as one group.
      accept, maxGroup: thread ? THREAD_GROUP : undefined, maxInFlight: thread ? undefined : POSTGRES_GROUPS_IN_FLIGHT, logger: ctx.log, secrets: () => secrets,
    });
    ctx.http.fast({
      path: '/webhooks', methods: ['POST'], budget: new RequestBudget(rateLimit.webhooksMax, rateLimit.windowMs),
      auth: { verify: ingress.signature }, body: DELIVERY_BODY, refused: () => ingress.refused(),
      unexpected: 'An unexpected error occurred; nothing of this delivery was recorded. Redeliver it.',
      handler: ({ req, res, received }) => ingress.handle(req, res, received!),
    });
    ctx.http.document({
      paths: {
        '/webhooks': {
          post: {
            summary: 'receive a webhook delivery',
            security: [{ hubSignature: [] }],
            parameters: [
              { name: 'X-GitHub-Event', in: 'header', required: true, schema: { type: 'string' } },
              { name: 'X-GitHub-Delivery', in: 'header', required: true, schema: { type: 'string' } },
              { name: 'X-GitHub-Hook-ID', in: 'header', required: false, schema: { type: 'string' } },
              { name: 'X-Hub-Signature-256', in: 'header', required: true, schema: { type: 'string', pattern: '^sha256=[0-9a-f]{64}$' } },
            ],
            requestBody: { required: true, content: { 'application/json': { schema: { type: 'object' } }, 'application/x-www-form-urlencoded': { schema: { type: 'object', properties: { payload: { type: 'string' } } } } } },
            responses: {
              200: jsonResponse('DeliveryAccepted', 'recorded (or a duplicate of a recorded delivery)'),
              400: errorResponse('invalid signature, missing headers or bad payload'),
              413: errorResponse('over 25 MB'),
              415: errorResponse('another content type'),
              429: errorResponse('too many deliveries; see Retry-After'),
              503: errorResponse('no webhook secret configured'),
            },
          },
        },
      },
    });
    registerGithubHandlers(ctx.jobs);
    return { follow: (follower) => void followers.push(follower) };
  },
});
