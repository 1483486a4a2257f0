/**
 * The daemons of one gateway that share a PostgreSQL store: the events their
 * clients should hear from any of them, and `store.status` (the backend, its
 * schema, the daemons attached and who holds each singleton). On SQLite a
 * daemon is alone, and status says so.
 */
import { redactedUrl } from '../../shared/store-url.ts';
import { defineModule } from '../kernel/module.ts';

/**
 * Events that reach clients of every daemon sharing a PostgreSQL store: an
 * operator approves a pairing wherever they are connected. A run's stream
 * (agent.*) stays with the daemon that runs it.
 */
const SHARED_EVENTS = new Set(['device.pair.requested', 'device.pair.resolved', 'channel.pair.requested', 'channel.pair.resolved', 'jobs.changed', 'session.message', 'session.wake', 'channel.status', 'exec.approval']);

export default defineModule({
  id: 'cluster',
  setup(ctx) {
    const { store, events, daemon } = ctx;
    const coordinator = store.coordinator;
    if (coordinator) {
      // What this daemon's modules emit goes to the others; what theirs emit comes to this one's clients.
      events.subscribe((frame) => {
        if (!frame.remote && SHARED_EVENTS.has(frame.event)) coordinator.publish(frame.event, frame.payload, frame.scope);
      });
      coordinator.onEvent((event, payload, scope) => {
        if (SHARED_EVENTS.has(event)) events.relay(event, payload, scope);
      });
    }

    ctx.rpc.method({
      name: 'store.status',
      handler: async () => {
        const attached = await store.attached();
        const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
        return {
          backend: store.kind,
          location: store.dialect.shared ? redactedUrl(process.env.GATEWAY_STORE_URL || ctx.config().store.url || '') : daemon.paths.db,
          schemaVersion: await store.schemaVersion(),
          modules: await store.moduleVersions(),
          sizeBytes: await store.sizeBytes(daemon.paths.db),
          self: daemon.instanceId,
          daemons: attached
            ? attached.map((entry) => ({ ...entry, connectedAt: iso(entry.connectedAt) }))
            : [{ instanceId: daemon.instanceId, profile: daemon.profile, address: null, connectedAt: new Date(daemon.startedAt).toISOString() }],
          singletons: await store.singletonHolders([...store.singletonNames].sort(), daemon.instanceId),
        };
      },
    });
  },
});
