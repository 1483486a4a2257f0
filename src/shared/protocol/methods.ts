import type { OperatorScope } from './scopes.ts';

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
} as const satisfies Record<string, OperatorScope>;

export type MethodName = keyof typeof METHOD_SCOPES;

/** Events the daemon pushes. */
export const EVENTS = ['connect.challenge', 'tick', 'shutdown', 'device.pair.requested', 'device.pair.resolved', 'device.revoked'] as const;
