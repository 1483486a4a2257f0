/**
 * What operators and agents call: the channels and their accounts' states,
 * pairing (list, approve, reject, revoke, the allowed senders) and
 * message.send, as an RPC method and as a tool; each decision audited.
 */
import { normalizePairingCode } from '../../shared/channels.ts';
import { DomainError } from '../kernel/errors.ts';
import type { ModuleContext, RpcClient } from '../kernel/module.ts';
import { messageView } from '../sessions/module.ts';
import { pairRequestView, type DmPairing } from './dm-pairing.ts';
import type { ChannelManager } from './manager.ts';

const CHANNEL_ID = { type: 'string', pattern: '^[a-z0-9][a-z0-9_-]{0,31}$' };

export function registerChannelMethods(ctx: ModuleContext, { channels, pairing }: { channels: ChannelManager; pairing: DmPairing }): void {
  const { store } = ctx;
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
      const sent = await channels.send({
        channel: params.channel, account: params.account, to: params.to, text: params.text, via: client.deviceId,
        ...(params.file !== undefined ? { file: params.file } : {}), ...(params.agent !== undefined ? { agent: params.agent } : {}),
      });
      await audit('message.sent', client, sent.session.key, { messageId: sent.message.id, outbox: sent.delivery.id, status: sent.delivery.status, ...(params.file ? { file: params.file } : {}) });
      return { sent: sent.delivery.status === 'sent', sessionKey: sent.session.key, message: messageView(sent.message), delivery: sent.delivery };
    },
  });
  ctx.rpc.method({
    name: 'message.react',
    handler: async (params, client) => {
      const done = await channels.react({ channel: params.channel, account: params.account, to: params.to, messageId: params.messageId, emoji: params.emoji });
      await audit('message.reacted', client, done.sessionKey, { messageId: params.messageId, emoji: params.emoji, outbox: done.delivery.id, status: done.delivery.status });
      return { reacted: done.delivery.status === 'sent', sessionKey: done.sessionKey, delivery: done.delivery };
    },
  });

  ctx.tools.add({
    name: 'message.send',
    description: 'Send a message to a peer or room through a channel; it is recorded in the session.',
    inputSchema: {
      type: 'object',
      additionalProperties: false,
      required: ['channel', 'to'],
      properties: {
        channel: CHANNEL_ID, account: CHANNEL_ID,
        to: { type: 'string', minLength: 1, maxLength: 64 },
        text: { type: 'string', maxLength: 4000, description: 'the message (with a file: its caption)' },
        file: { type: 'string', minLength: 1, maxLength: 4096, description: 'a file of your workspace to send (its path there)' },
      },
    },
    handler: async (args, context) => {
      const sent = await channels.send({
        channel: String(args.channel), to: String(args.to), text: String(args.text ?? ''), via: `tool:${context.caller}`,
        ...(args.account ? { account: String(args.account) } : {}),
        // Only ever the calling agent's own workspace.
        ...(args.file !== undefined ? { file: String(args.file), agent: context.agent ?? '' } : {}),
      });
      const delivery = sent.delivery;
      return {
        sent: delivery.status === 'sent', sessionKey: sent.session.key, messageId: sent.message.id,
        ...(delivery.status === 'sent' ? {} : { note: `not delivered yet (${delivery.error ?? 'waiting its turn'}); it is sent when the channel can take it` }),
      };
    },
  });

  ctx.tools.add({
    name: 'message.react',
    description: 'React with an emoji to a message someone sent you on a channel (messageId: its id in the session, or the platform\'s).',
    inputSchema: {
      type: 'object',
      additionalProperties: false,
      required: ['channel', 'to', 'messageId', 'emoji'],
      properties: {
        channel: CHANNEL_ID, account: CHANNEL_ID,
        to: { type: 'string', minLength: 1, maxLength: 128 },
        messageId: { type: 'string', minLength: 1, maxLength: 128 },
        emoji: { type: 'string', minLength: 1, maxLength: 32 },
      },
    },
    handler: async (args) => {
      const done = await channels.react({
        channel: String(args.channel), to: String(args.to), messageId: String(args.messageId), emoji: String(args.emoji),
        ...(args.account ? { account: String(args.account) } : {}),
      });
      return { reacted: done.delivery.status === 'sent', ...(done.delivery.status === 'sent' ? {} : { note: `not put yet (${done.delivery.error ?? 'waiting its turn'})` }) };
    },
  });

  ctx.tools.add({
    name: 'message.attach',
    description: 'Attach a file of your workspace to your reply in this channel conversation (it is sent before your answer\'s text).',
    inputSchema: {
      type: 'object',
      additionalProperties: false,
      required: ['path'],
      properties: {
        path: { type: 'string', minLength: 1, maxLength: 4096 },
        caption: { type: 'string', maxLength: 1000 },
      },
    },
    handler: async (args, context) => {
      if (!context.sessionKey || context.surface !== 'agent') throw new DomainError('invalid', 'message.attach attaches to the reply of an agent answering on a channel; use message.send with a file otherwise.');
      const done = await channels.attach({ sessionKey: context.sessionKey, agent: context.agent ?? '', file: String(args.path), caption: String(args.caption ?? '') });
      return { attached: done.name, bytes: done.bytes, sent: done.delivery.status === 'sent', ...(done.delivery.error ? { note: done.delivery.error } : {}) };
    },
  });
}
