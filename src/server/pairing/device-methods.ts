import { Limits } from '../../shared/protocol/limits.ts';
import { isOperatorScope, OPERATOR_SCOPES, ROLES } from '../../shared/protocol/scopes.ts';
import type { Store } from '../store/database.ts';
import type { ControlPlane } from '../ws/control-plane.ts';
import type { MethodTable, RpcClient } from '../ws/method-table.ts';
import { idParam, invalidParams, paramsObject, RpcError } from '../ws/rpc-error.ts';
import type { Device, DeviceRegistry, PairingRequest } from './device-registry.ts';

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

export const deviceView = (device: Device) => ({
  id: device.id, role: device.role, scopes: device.scopes, clientId: device.clientId, platform: device.platform,
  pairedAt: iso(device.pairedAt), pairedBy: device.pairedBy, lastSeenAt: iso(device.lastSeenAt), lastAddress: device.lastAddress,
  rotatedAt: iso(device.rotatedAt),
});

export const requestView = (request: PairingRequest) => ({
  requestId: request.id, deviceId: request.deviceId, role: request.role, scopes: request.scopes, clientId: request.clientId,
  platform: request.platform, address: request.address, viaProxy: request.viaProxy,
  createdAt: iso(request.createdAt), expiresAt: iso(request.expiresAt),
});

export interface DeviceMethodDeps {
  devices: DeviceRegistry;
  store: Store;
  controlPlane: () => ControlPlane;
}

/** Device pairing, revocation, invites and the audit log over RPC. */
export function registerDeviceMethods(methods: MethodTable, deps: DeviceMethodDeps): void {
  const { devices, store } = deps;
  const resolved = (request: PairingRequest, decision: 'approved' | 'rejected', client: RpcClient) => {
    store.audit(`device.pair.${decision}`, { actor: client.deviceId, subject: request.deviceId, address: client.address, detail: { requestId: request.id, role: request.role, scopes: request.scopes } });
    deps.controlPlane().broadcast('device.pair.resolved', { requestId: request.id, deviceId: request.deviceId, decision }, 'operator.pairing');
  };

  methods
    .add('devices.list', () => ({ paired: devices.list().map(deviceView), pending: devices.pending().map(requestView) }))
    .add('devices.approve', (params, client) => {
      const input = paramsObject(params);
      const request = input.latest === true ? devices.latestPending() : devices.findPending(idParam(input, 'requestId'));
      if (!request) throw new RpcError('NOT_FOUND', input.latest === true ? 'no pairing request is pending' : `no pending pairing request ${String(input.requestId)} (unknown, expired or already decided)`);
      const device = devices.approve(request.id, client.deviceId)!;
      resolved(request, 'approved', client);
      return { approved: true, requestId: request.id, device: deviceView(device) };
    })
    .add('devices.reject', (params, client) => {
      const requestId = idParam(params, 'requestId');
      const request = devices.reject(requestId);
      if (!request) throw new RpcError('NOT_FOUND', `no pending pairing request ${requestId} (unknown, expired or already decided)`);
      resolved(request, 'rejected', client);
      return { rejected: true, requestId: request.id, deviceId: request.deviceId };
    })
    .add('devices.revoke', (params, client) => {
      const deviceId = idParam(params, 'deviceId');
      const device = devices.revoke(deviceId);
      if (!device) throw new RpcError('NOT_FOUND', `no paired device ${deviceId}`);
      store.audit('device.revoked', { actor: client.deviceId, subject: deviceId, address: client.address });
      const closed = deps.controlPlane().closeDevice(deviceId, 'device revoked');
      return { revoked: true, deviceId, closedConnections: closed };
    })
    .add('devices.rotate', (params, client) => {
      const deviceId = idParam(params, 'deviceId');
      const token = devices.rotate(deviceId);
      if (!token) throw new RpcError('NOT_FOUND', `no paired device ${deviceId}`);
      store.audit('device.rotated', { actor: client.deviceId, subject: deviceId, address: client.address });
      const closed = deps.controlPlane().closeDevice(deviceId, 'device token rotated');
      return { rotated: true, deviceId, deviceToken: token, closedConnections: closed };
    })
    .add('devices.invite', (params, client) => {
      const input = paramsObject(params);
      const role = input.role ?? 'operator';
      if (typeof role !== 'string' || !(ROLES as readonly string[]).includes(role)) throw invalidParams(`role must be one of ${ROLES.join(', ')}`);
      const scopes = input.scopes ?? (role === 'operator' ? ['operator.read'] : []);
      if (!Array.isArray(scopes) || !scopes.every(isOperatorScope)) throw invalidParams(`scopes must be some of ${OPERATOR_SCOPES.join(', ')}`);
      const ttlMs = input.ttlMs ?? Limits.inviteDefaultTtlMs;
      if (typeof ttlMs !== 'number' || !Number.isInteger(ttlMs) || ttlMs < 1000 || ttlMs > Limits.inviteMaxTtlMs) {
        throw invalidParams(`ttlMs must be an integer from 1000 to ${Limits.inviteMaxTtlMs}`);
      }
      const invite = devices.createInvite(role, scopes as string[], ttlMs);
      store.audit('device.invite.created', { actor: client.deviceId, address: client.address, detail: { role, scopes, expiresAt: invite.expiresAt } });
      return { code: invite.code, expiresAt: new Date(invite.expiresAt).toISOString() };
    })
    .add('audit.list', (params) => {
      const input = paramsObject(params);
      const since = input.since === undefined ? 0 : Number(input.since);
      const limit = input.limit === undefined ? 200 : Number(input.limit);
      if (!Number.isFinite(since) || !Number.isInteger(limit) || limit < 1 || limit > 1000) throw invalidParams('since must be a time in ms and limit 1-1000');
      const rows = store.prepare('SELECT * FROM audit_events WHERE at >= ? ORDER BY id DESC LIMIT ?').all(since, limit) as Record<string, unknown>[];
      return {
        events: rows.reverse().map((row) => ({
          id: Number(row.id), at: new Date(Number(row.at)).toISOString(), kind: row.kind, actor: row.actor, subject: row.subject,
          address: row.address, detail: row.detail === null ? null : JSON.parse(String(row.detail)),
        })),
      };
    });
}
