/**
 * Messaging channels: inbox (what comes in, admitted and stored), outbox
 * (every reply kept until its platform takes it) and the platforms (seven
 * built in, one folder each, more from plugins); the DM policy and pairing
 * codes for strangers; sessions with their history; operator messages.
 *
 * setup() wires the named parts: the manager (manager.ts) over the inbox and
 * the outbox, the built-in kinds (kinds.ts), the webhook route
 * (webhook-route.ts) and the RPC methods and tool (methods.ts).
 */
import { join } from 'node:path';
import { defineModule } from '../kernel/module.ts';
import jobsModule from '../jobs/module.ts';
import sessionsModule from '../sessions/module.ts';
import { ATTACHMENT_MIGRATIONS, Attachments } from './attachments.ts';
import { CHANNEL_MIGRATIONS, DmPairing } from './dm-pairing.ts';
import { InboundMarks } from './inbound-marks.ts';
import { BUILT_IN_KINDS, checkChannelKinds } from './kinds.ts';
import { ChannelManager } from './manager.ts';
import { AnswerHooks } from './answer-hooks.ts';
import { registerChannelMethods } from './methods.ts';
import { Outbox, OUTBOX_MIGRATIONS, replyDeliveries } from './outbox/outbox.ts';
import { registerWebhookRoute } from './webhook-route.ts';

export type { ChannelManager, Inbound, InboundListener } from './manager.ts';
export type { AnswerHooks, InboundClaim, PressHandler } from './answer-hooks.ts';
export type { ReplyStream } from './reply-stream.ts';
export type { Outbox, OutboxItem } from './outbox/outbox.ts';
export { describeAttachment } from './attachments.ts';
export { plainText } from './formatting.ts';
export type { Attachments } from './attachments.ts';

/** What other modules get from this one. */
export interface Channels {
  channels: ChannelManager;
  attachments: Attachments;
  outbox: Outbox;
  /** Where the answers people give in the chats (buttons, words) reach the features that asked. */
  hooks: AnswerHooks;
}

/** The event a daemon publishes (sharing a PostgreSQL store) after queuing replies for a channel another daemon may run. */
const OUTBOX_EVENT = 'channel.outbox';

export default defineModule<Channels>({
  id: 'channels',
  needs: [jobsModule, sessionsModule],
  migrations: [...CHANNEL_MIGRATIONS, ...OUTBOX_MIGRATIONS, ...ATTACHMENT_MIGRATIONS].sort((a, b) => a.version - b.version),
  setup(ctx) {
    const { store, events } = ctx;
    const sessions = ctx.use(sessionsModule);
    const { retention } = ctx.use(jobsModule);
    const pairing = new DmPairing(store);
    const outbox = new Outbox({
      store, logger: ctx.log,
      // Sharing a PostgreSQL store: the daemon running the channel hears of the reply at once (else it looks every few seconds).
      announce: (channel) => store.coordinator?.publish(OUTBOX_EVENT, { channel }, 'internal'),
    });
    store.coordinator?.onEvent((event, payload) => {
      if (event === OUTBOX_EVENT) outbox.wake(String((payload as { channel?: unknown } | null)?.channel ?? ''));
    });
    const attachments = new Attachments(store, ctx.log);
    const marks = new InboundMarks({ store });
    const hooks = new AnswerHooks({ kinds: () => ctx.table().channels, store, marks, outbox });
    const channels = new ChannelManager({
      kinds: () => ctx.table().channels, config: ctx.config, secret: (name) => ctx.secrets.get(name), keepSecret: (name, value) => ctx.secrets.set(name, value),
      folder: (id) => join(ctx.daemon.paths.dir, 'channels', id), logger: ctx.log,
      pairing, sessions, store, outbox, marks, attachments, hooks, emit: (event, payload, scope) => events.emit(event, payload, scope),
      // Sharing a PostgreSQL store, each channel connects from the one daemon holding its singleton.
      singleton: store.coordinator ? (name, handlers) => store.singleton(name, handlers) : undefined,
    });

    retention('pairingRequests', (retentionMs) => pairing.prune(retentionMs));
    retention('channelOutbox', async (retentionMs) => (await outbox.prune(retentionMs)) + (await marks.prune(retentionMs)));
    ctx.onStart(() => channels.start());
    ctx.onStop(() => channels.stop());
    sessions.decorate(replyDeliveries(outbox));

    checkChannelKinds(ctx);
    for (const kind of BUILT_IN_KINDS) ctx.channels.add(kind);
    registerWebhookRoute(ctx, channels);
    registerChannelMethods(ctx, { channels, pairing });
    return { channels, outbox, attachments, hooks };
  },
});
