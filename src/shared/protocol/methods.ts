import type { OperatorScope } from './scopes.ts';

/** Held by every connection of role node, and only by them: what a node may call. */
export const NODE_SCOPE = 'node';

/** Every RPC method and the scope it needs: the one table both sides read. */
export const METHOD_SCOPES = {
  health: 'operator.read',
  status: 'operator.read',
  'config.get': 'operator.read',
  'config.set': 'operator.admin',
  'config.unset': 'operator.admin',
  'secrets.changed': 'operator.admin',
  shutdown: 'operator.admin',
  'devices.list': 'operator.pairing',
  'devices.approve': 'operator.pairing',
  'devices.reject': 'operator.pairing',
  'devices.revoke': 'operator.pairing',
  'devices.rotate': 'operator.admin',
  'devices.invite': 'operator.pairing',
  'audit.list': 'operator.admin',
  'tokens.create': 'operator.admin',
  'tokens.list': 'operator.read',
  'tokens.revoke': 'operator.admin',
  'jobs.list': 'operator.read',
  'jobs.get': 'operator.read',
  'jobs.retry': 'operator.write',
  'nodes.list': 'operator.read',
  'nodes.invoke': 'operator.write',
  'node.invoke.result': NODE_SCOPE,
  'channels.list': 'operator.read',
  'channels.status': 'operator.read',
  'pair.list': 'operator.pairing',
  'pair.approve': 'operator.pairing',
  'pair.reject': 'operator.pairing',
  'pair.revoke': 'operator.pairing',
  'pair.allowed': 'operator.pairing',
  'sessions.list': 'operator.read',
  'sessions.history': 'operator.read',
  'message.send': 'operator.write',
  reload: 'operator.admin',
  'plugins.list': 'operator.read',
  'tools.catalog': 'operator.read',
  'tools.invoke': 'operator.write',
} as const satisfies Record<string, OperatorScope | typeof NODE_SCOPE>;

export type MethodName = keyof typeof METHOD_SCOPES;

/** Events the daemon pushes. */
export const EVENTS = [
  'connect.challenge', 'tick', 'shutdown', 'device.pair.requested', 'device.pair.resolved', 'device.revoked', 'node.invoke',
  'channel.status', 'channel.pair.requested', 'channel.pair.resolved', 'session.message',
] as const;
