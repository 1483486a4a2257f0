import { normalizePairingCode } from '../../shared/channels.ts';
import type { Store } from '../store/database.ts';
import type { MethodTable, RpcClient } from '../ws/method-table.ts';
import { idParam, invalidParams, paramsObject, RpcError } from '../ws/rpc-error.ts';
import { ChannelError, messageView, pairRequestView, sessionView, type ChannelManager } from './manager.ts';
import type { DmPairing } from './dm-pairing.ts';
import type { SessionStore } from './sessions.ts';

const CHANNEL_ID = /^[a-z0-9][a-z0-9_-]{0,31}$/;

function channelParam(params: Record<string, unknown>, required: true): string;
function channelParam(params: Record<string, unknown>, required: false): string | undefined;
function channelParam(params: Record<string, unknown>, required: boolean): string | undefined {
  const value = params.channel;
  if (value === undefined && !required) return undefined;
  if (typeof value !== 'string' || !CHANNEL_ID.test(value)) throw invalidParams('params.channel must be a channel id such as irc');
  return value;
}

function limitParam(params: Record<string, unknown>, fallback: number, max: number): number {
  const limit = params.limit ?? fallback;
  if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1 || limit > max) throw invalidParams(`params.limit must be an integer from 1 to ${max}`);
  return limit;
}

/** ChannelErrors become protocol errors: NOT_FOUND (exit 5), UNAVAILABLE, or INVALID_REQUEST. */
async function asRpc<T>(work: () => T | Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (!(error instanceof ChannelError)) throw error;
    if (error.kind === 'not-found') throw new RpcError('NOT_FOUND', error.message);
    if (error.kind === 'unavailable') throw new RpcError('UNAVAILABLE', error.message, undefined, true);
    throw invalidParams(error.message);
  }
}

export interface ChannelMethodDeps {
  channels: ChannelManager;
  pairing: DmPairing;
  sessions: SessionStore;
  store: Store;
}

/** Channels, DM pairing, sessions and operator messages over RPC. */
export function registerChannelMethods(methods: MethodTable, deps: ChannelMethodDeps): void {
  const { channels, pairing, sessions, store } = deps;
  const audit = (kind: string, client: RpcClient, subject: string, detail: Record<string, unknown>) =>
    store.audit(kind, { actor: client.deviceId, subject, address: client.address, detail });

  methods
    .add('channels.list', () => ({ channels: channels.list() }))
    .add('channels.status', () => ({ channels: channels.status() }))
    .add('pair.list', (params) => {
      const channel = channelParam(paramsObject(params), false);
      return { requests: pairing.pending(channel).map(pairRequestView) };
    })
    .add('pair.approve', (params, client) => asRpc(async () => {
      const input = paramsObject(params);
      const channel = channelParam(input, true);
      const code = normalizePairingCode(idParam(input, 'code'));
      const result = await channels.approve(channel, code, client.deviceId, input.notify === true);
      if (!result.alreadyApproved) audit('channel.pair.approved', client, `${channel}:${result.sender}`, { code, account: result.account, notified: result.notified });
      return result;
    }))
    .add('pair.reject', (params, client) => asRpc(() => {
      const input = paramsObject(params);
      const channel = channelParam(input, true);
      const result = channels.reject(channel, normalizePairingCode(idParam(input, 'code')), client.deviceId);
      audit('channel.pair.rejected', client, `${channel}:${result.sender}`, { code: result.code, account: result.account });
      return result;
    }))
    .add('pair.revoke', (params, client) => asRpc(() => {
      const input = paramsObject(params);
      const channel = channelParam(input, true);
      const result = channels.revoke(channel, idParam(input, 'sender'));
      audit('channel.sender.revoked', client, `${channel}:${result.sender}`, {});
      return result;
    }))
    .add('pair.allowed', (params) => {
      const channel = channelParam(paramsObject(params), false);
      return {
        senders: pairing.allowed(channel).map((entry) => ({
          channel: entry.channel, sender: entry.sender, senderName: entry.senderName, account: entry.account,
          addedAt: new Date(entry.addedAt).toISOString(), addedBy: entry.addedBy, code: entry.code,
        })),
      };
    })
    .add('sessions.list', (params) => {
      const input = paramsObject(params);
      const channel = channelParam(input, false);
      const limit = limitParam(input, 100, 1000);
      return { sessions: sessions.list({ channel, limit }).map((session) => sessionView(session, sessions.lastMessage(session.key))) };
    })
    .add('sessions.history', (params) => {
      const input = paramsObject(params);
      const key = input.key;
      if (typeof key !== 'string' || key.length === 0 || key.length > 256) throw invalidParams('params.key must be a session key');
      const limit = limitParam(input, 200, 1000);
      const before = input.before;
      if (before !== undefined && (typeof before !== 'number' || !Number.isInteger(before) || before < 1)) throw invalidParams('params.before must be a message id');
      const session = sessions.get(key);
      if (!session) throw new RpcError('NOT_FOUND', `no session ${key}`);
      return { session: sessionView(session), messages: sessions.history(key, { limit, before }).map(messageView) };
    })
    .add('message.send', (params, client) => asRpc(async () => {
      const input = paramsObject(params);
      const channel = channelParam(input, true);
      const to = idParam(input, 'to');
      if (typeof input.text !== 'string') throw invalidParams('params.text must be a string');
      if (input.account !== undefined && (typeof input.account !== 'string' || !CHANNEL_ID.test(input.account))) throw invalidParams('params.account must be an account name');
      const sent = await channels.send({ channel, account: input.account as string | undefined, to, text: input.text, via: client.deviceId });
      audit('message.sent', client, sent.session.key, { messageId: sent.message.id });
      return { sent: true, sessionKey: sent.session.key, message: messageView(sent.message) };
    }));
}
