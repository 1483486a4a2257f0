/**
 * Messaging channels: IRC built in, more from plugins; the DM policy and
 * pairing codes for strangers; sessions with their history; operator messages.
 */
import { normalizePairingCode } from '../../shared/channels.ts';
import { unknownChannelProblems } from '../../shared/config/channel-kinds.ts';
import { defineModule, type RpcClient } from '../kernel/module.ts';
import { errorResponse } from '../kernel/api-doc.ts';
import jobsModule from '../jobs/module.ts';
import sessionsModule, { messageView } from '../sessions/module.ts';
import { CHANNEL_MIGRATIONS, DmPairing } from './dm-pairing.ts';
import { ircFold } from './irc-names.ts';
import { signalPeer } from './signal/peers.ts';
import { pairRequestView } from './dm-pairing.ts';
import { ChannelManager } from './manager.ts';
import { InboundMarks } from './inbound-marks.ts';
import { Outbox, OUTBOX_MIGRATIONS } from './outbox.ts';
import { ATTACHMENT_MIGRATIONS, Attachments } from './attachments.ts';

export type { ChannelManager, Inbound, InboundListener } from './manager.ts';
export type { ReplyStream } from './reply-stream.ts';
export type { Outbox, OutboxItem } from './outbox.ts';
export { describeAttachment } from './attachments.ts';
export type { Attachments } from './attachments.ts';

/** What other modules get from this one. */
export interface Channels {
  channels: ChannelManager;
  attachments: Attachments;
  outbox: Outbox;
}

/** The event a daemon publishes (sharing a PostgreSQL store) after queuing replies for a channel another daemon may run. */
const OUTBOX_EVENT = 'channel.outbox';

/** Largest webhook delivery a platform may post (Telegram's updates and Slack's events are a few KB). */
const WEBHOOK_MAX_BYTES = 1024 * 1024;

const CHANNEL_ID = { type: 'string', pattern: '^[a-z0-9][a-z0-9_-]{0,31}$' };

export default defineModule<Channels>({
  id: 'channels',
  needs: [jobsModule, sessionsModule],
  migrations: [...CHANNEL_MIGRATIONS, ...OUTBOX_MIGRATIONS, ...ATTACHMENT_MIGRATIONS].sort((a, b) => a.version - b.version),
  setup(ctx) {
    const { store, events } = ctx;
    const pairing = new DmPairing(store);
    const sessions = ctx.use(sessionsModule);
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
    const channels = new ChannelManager({
      kinds: () => ctx.table().channels, config: ctx.config, secret: (name) => ctx.secrets.get(name), logger: ctx.log,
      pairing, sessions, store, outbox, marks, attachments, emit: (event, payload, scope) => events.emit(event, payload, scope),
      // Sharing a PostgreSQL store, each channel connects from the one daemon holding its singleton.
      singleton: store.coordinator ? (name, handlers) => store.singleton(name, handlers) : undefined,
    });
    // channels.<id> names a kind the gateway has, built in or from a loaded plugin.
    ctx.configCheck((next) => {
      // Plugins configured and not loaded yet may add channels: their names wait for the reload to say.
      const loaded = new Set(ctx.daemon.plugins().plugins.filter((plugin) => !plugin.builtin && plugin.status === 'loaded').map((plugin) => plugin.source));
      if (next.plugins.load.some((source) => !loaded.has(source))) return [];
      return unknownChannelProblems(next, [...ctx.table().channels.keys()]);
    });
    ctx.use(jobsModule).retention('pairingRequests', (retentionMs) => pairing.prune(retentionMs));
    ctx.use(jobsModule).retention('channelOutbox', async (retentionMs) => (await outbox.prune(retentionMs)) + (await marks.prune(retentionMs)));
    ctx.onStart(() => channels.start());
    ctx.onStop(() => channels.stop());
    // A run's answer in a session's history says how its reply stands: sent (with the platform's ids), waiting, given up.
    sessions.decorate(async (session, messages) => {
      if (!messages.some((message) => message.runId)) return;
      const replies = await outbox.ofSession(session.key);
      const last = new Map<string, (typeof messages)[number]>();
      for (const message of messages) if (message.runId && message.role === 'assistant' && message.kind !== 'tool_call') last.set(message.runId, message);
      for (const [runId, message] of last) {
        const reply = replies.get(runId);
        if (reply) message.delivery = reply;
      }
    });

    // Each channel loads its client library only when it starts.
    ctx.channels.add({
      id: 'irc',
      label: 'IRC',
      normalizePeer: ircFold,
      create: async (id, context) => {
        const { IrcChannel } = await import('./irc.ts');
        return new IrcChannel(id, context);
      },
    });
    ctx.channels.add({
      id: 'telegram',
      label: 'Telegram',
      normalizePeer: (peer) => (peer.trim().startsWith('@') ? peer.trim().toLowerCase() : peer.trim()),
      create: async (id, context) => {
        const { TelegramChannel } = await import('./telegram.ts');
        return new TelegramChannel(id, context);
      },
    });
    ctx.channels.add({
      id: 'slack',
      label: 'Slack',
      normalizePeer: (peer) => peer.trim().toUpperCase(),
      create: async (id, context) => {
        const { SlackChannel } = await import('./slack.ts');
        return new SlackChannel(id, context);
      },
    });
    ctx.channels.add({
      id: 'discord',
      label: 'Discord',
      normalizePeer: (peer) => peer.trim().replace(/^<@!?(\d+)>$/, '@$1'),
      create: async (id, context) => {
        const { DiscordChannel } = await import('./discord.ts');
        return new DiscordChannel(id, context);
      },
    });
    ctx.channels.add({
      id: 'email',
      label: 'Email',
      normalizePeer: (peer) => peer.trim().replace(/^mailto:/i, '').split('?')[0]!.toLowerCase(),
      create: async (id, context) => {
        const { EmailChannel } = await import('./email.ts');
        return new EmailChannel(id, context);
      },
    });
    ctx.channels.add({
      id: 'matrix',
      label: 'Matrix',
      normalizePeer: (peer) => peer.trim(),
      create: async (id, context) => {
        const { MatrixChannel } = await import('./matrix.ts');
        return new MatrixChannel(id, context);
      },
    });
    ctx.channels.add({
      id: 'signal',
      label: 'Signal',
      normalizePeer: signalPeer,
      create: async (id, context) => {
        const { SignalChannel } = await import('./signal/signal.ts');
        return new SignalChannel(id, context);
      },
    });
    ctx.channels.add({
      id: 'xmpp',
      label: 'XMPP',
      normalizePeer: (peer) => peer.split('/')[0]!.trim().toLowerCase(),
      create: async (id, context) => {
        const { XmppChannel } = await import('./xmpp.ts');
        return new XmppChannel(id, context);
      },
    });

    // Webhook deliveries of the channels that take them (Telegram's webhook mode, Slack's Events API): each checks its platform's signature or secret.
    ctx.http.route({
      method: 'POST', path: '/channels/:channel/:account/webhook', auth: 'plugin',
      // Read by the pipeline, left as bytes: each platform checks its signature over them before parsing.
      body: { types: ['application/json'], limit: WEBHOOK_MAX_BYTES, raw: true },
      handler: async (http) => {
        const answer = await channels.receive(http.params.channel!, { account: http.params.account!, headers: http.req.headers, body: http.received!.raw });
        http.status = answer.status;
        http.body = answer.body ?? {};
      },
    });

    ctx.http.document({
      paths: {
        '/channels/{channel}/{account}/webhook': {
          post: {
            summary: 'a platform\'s webhook delivery for a channel account (Telegram with channels.<id>.webhookUrl, Slack with channels.<id>.events http); answered 2xx only once stored',
            security: [],
            parameters: [
              { name: 'channel', in: 'path', required: true, schema: { type: 'string' } },
              { name: 'account', in: 'path', required: true, schema: { type: 'string' } },
            ],
            requestBody: { required: true, content: { 'application/json': { schema: { type: 'object' } } } },
            responses: {
              200: { description: 'stored (or a redelivery of what was)' },
              400: errorResponse('not JSON the platform would send'),
              401: errorResponse('the platform\'s secret token or signature is missing or wrong'),
              404: errorResponse('no channel account here takes webhook deliveries at this address'),
              413: errorResponse('over 1 MB'),
              415: errorResponse('not sent as application/json'),
              503: errorResponse('it could not be stored now, another daemon of the gateway runs the channel, or the account is not ready: the platform delivers it again'),
            },
          },
        },
      },
    });

    const audit = (kind: string, client: RpcClient, subject: string, detail: Record<string, unknown>) =>
      store.audit(kind, { actor: client.deviceId, subject, address: client.address, detail });

    ctx.rpc.method({ name: 'channels.list', handler: async () => ({ channels: await channels.list() }) });
    ctx.rpc.method({ name: 'channels.status', handler: () => ({ channels: channels.status() }) });
    // A misspelt channel is named as such, not answered with an empty list.
    ctx.rpc.method({
      name: 'pair.list',
      handler: async ({ channel }) => {
        if (channel !== undefined) channels.assertKnown(channel);
        return { requests: (await pairing.pending(channel)).map(pairRequestView) };
      },
    });
    ctx.rpc.method({
      name: 'pair.approve',
      handler: async (params, client) => {
        const code = normalizePairingCode(params.code);
        const result = await channels.approve(params.channel, code, client.deviceId, params.notify === true);
        if (!result.alreadyApproved) await audit('channel.pair.approved', client, `${params.channel}:${result.sender}`, { code, account: result.account, notified: result.notified });
        return result;
      },
    });
    ctx.rpc.method({
      name: 'pair.reject',
      handler: async (params, client) => {
        const result = await channels.reject(params.channel, normalizePairingCode(params.code), client.deviceId);
        await audit('channel.pair.rejected', client, `${params.channel}:${result.sender}`, { code: result.code, account: result.account });
        return result;
      },
    });
    ctx.rpc.method({
      name: 'pair.revoke',
      handler: async (params, client) => {
        const result = await channels.revoke(params.channel, params.sender);
        await audit('channel.sender.revoked', client, `${params.channel}:${result.sender}`, {});
        return result;
      },
    });
    ctx.rpc.method({
      name: 'pair.allowed',
      handler: async ({ channel }) => {
        if (channel !== undefined) channels.assertKnown(channel);
        return {
          senders: (await pairing.allowed(channel)).map((entry) => ({
            channel: entry.channel, sender: entry.sender, senderName: entry.senderName, account: entry.account,
            addedAt: new Date(entry.addedAt).toISOString(), addedBy: entry.addedBy, code: entry.code,
          })),
        };
      },
    });
    ctx.rpc.method({
      name: 'message.send',
      handler: async (params, client) => {
        const sent = await channels.send({ channel: params.channel, account: params.account, to: params.to, text: params.text, via: client.deviceId });
        await audit('message.sent', client, sent.session.key, { messageId: sent.message.id, outbox: sent.delivery.id, status: sent.delivery.status });
        return { sent: sent.delivery.status === 'sent', sessionKey: sent.session.key, message: messageView(sent.message), delivery: sent.delivery };
      },
    });

    ctx.tools.add({
      name: 'message.send',
      description: 'Send a message to a peer or room through a channel; it is recorded in the session.',
      inputSchema: {
        type: 'object',
        additionalProperties: false,
        required: ['channel', 'to', 'text'],
        properties: {
          channel: CHANNEL_ID, account: CHANNEL_ID,
          to: { type: 'string', minLength: 1, maxLength: 64 },
          text: { type: 'string', minLength: 1, maxLength: 4000 },
        },
      },
      handler: async (args, context) => {
        const sent = await channels.send({
          channel: String(args.channel), to: String(args.to), text: String(args.text), via: `tool:${context.caller}`,
          ...(args.account ? { account: String(args.account) } : {}),
        });
        const delivery = sent.delivery;
        return {
          sent: delivery.status === 'sent', sessionKey: sent.session.key, messageId: sent.message.id,
          ...(delivery.status === 'sent' ? {} : { note: `not delivered yet (${delivery.error ?? 'waiting its turn'}); it is sent when the channel can take it` }),
        };
      },
    });

    return { channels, outbox, attachments };
  },
});
