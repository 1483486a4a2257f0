/** Device pairing: who may connect to the control plane, pending requests, invites, revocation and rotation. */
import { defineModule } from '../kernel/module.ts';
import type { RpcClient } from '../kernel/module.ts';
import { DomainError } from '../kernel/errors.ts';
import type { DevicePairingRequestView, DeviceView } from '../../shared/protocol/results.ts';
import { Limits } from '../../shared/protocol/limits.ts';
import { DeviceRegistry, PAIRING_MIGRATIONS, type Device, type PairingRequest } from './device-registry.ts';
import { admit } from './handshake.ts';

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

const deviceView = (device: Device): DeviceView => ({
  id: device.id, role: device.role, scopes: device.scopes, clientId: device.clientId, platform: device.platform,
  pairedAt: iso(device.pairedAt), pairedBy: device.pairedBy, lastSeenAt: iso(device.lastSeenAt), lastAddress: device.lastAddress,
  rotatedAt: iso(device.rotatedAt),
});

const requestView = (request: PairingRequest): DevicePairingRequestView => ({
  requestId: request.id, deviceId: request.deviceId, role: request.role, scopes: request.scopes, clientId: request.clientId,
  platform: request.platform, address: request.address, viaProxy: request.viaProxy,
  createdAt: iso(request.createdAt), expiresAt: iso(request.expiresAt),
});

const undecided = (requestId: string) => new DomainError('not_found', `No pending pairing request ${requestId} (unknown, expired or already decided).`);

export default defineModule({
  id: 'pairing',
  migrations: PAIRING_MIGRATIONS,
  setup(ctx) {
    const { store, events, connections } = ctx;
    const devices = new DeviceRegistry(store);

    connections.admission((params, origin) => admit(params, origin, {
      credential: ctx.credential,
      devices,
      audit: (kind, fields) => store.audit(kind, fields),
      onPairingRequested: (request) => events.emit('device.pair.requested', requestView(request), 'operator.pairing'),
    }));

    const resolved = async (request: PairingRequest, decision: 'approved' | 'rejected', client: RpcClient) => {
      await store.audit(`device.pair.${decision}`, { actor: client.deviceId, subject: request.deviceId, address: client.address, detail: { requestId: request.id, role: request.role, scopes: request.scopes } });
      events.emit('device.pair.resolved', { requestId: request.id, deviceId: request.deviceId, decision }, 'operator.pairing');
    };

    ctx.rpc.method({ name: 'devices.list', handler: async () => ({ paired: (await devices.list()).map(deviceView), pending: (await devices.pending()).map(requestView) }) });
    ctx.rpc.method({
      name: 'devices.approve',
      handler: async (params, client) => {
        if (params.latest !== true && params.requestId === undefined) throw new DomainError('invalid', 'Name the request: params.requestId, or params.latest.');
        const request = params.latest === true ? await devices.latestPending() : await devices.findPending(params.requestId!);
        if (!request) throw params.latest === true ? new DomainError('not_found', 'No pairing request is pending.') : undecided(String(params.requestId));
        const device = await devices.approve(request.id, client.deviceId);
        if (!device) throw undecided(request.id);
        await resolved(request, 'approved', client);
        return { approved: true, requestId: request.id, device: deviceView(device) };
      },
    });
    ctx.rpc.method({
      name: 'devices.reject',
      handler: async ({ requestId }, client) => {
        const request = await devices.reject(requestId);
        if (!request) throw undecided(requestId);
        await resolved(request, 'rejected', client);
        return { rejected: true, requestId: request.id, deviceId: request.deviceId };
      },
    });
    ctx.rpc.method({
      name: 'devices.revoke',
      handler: async ({ deviceId }, client) => {
        if (!(await devices.revoke(deviceId))) throw new DomainError('not_found', `No paired device ${deviceId}.`);
        await store.audit('device.revoked', { actor: client.deviceId, subject: deviceId, address: client.address });
        return { revoked: true, deviceId, closedConnections: connections.closeDevice(deviceId, 'device revoked') };
      },
    });
    ctx.rpc.method({
      name: 'devices.rotate',
      handler: async ({ deviceId }, client) => {
        const token = await devices.rotate(deviceId);
        if (!token) throw new DomainError('not_found', `No paired device ${deviceId}.`);
        await store.audit('device.rotated', { actor: client.deviceId, subject: deviceId, address: client.address });
        return { rotated: true, deviceId, deviceToken: token, closedConnections: connections.closeDevice(deviceId, 'device token rotated') };
      },
    });
    ctx.rpc.method({
      name: 'devices.invite',
      handler: async (params, client) => {
        const role = params.role ?? 'operator';
        const scopes = params.scopes ?? (role === 'operator' ? ['operator.read'] : []);
        const invite = await devices.createInvite(role, scopes, params.ttlMs ?? Limits.inviteDefaultTtlMs);
        await store.audit('device.invite.created', { actor: client.deviceId, address: client.address, detail: { role, scopes, expiresAt: invite.expiresAt } });
        return { code: invite.code, expiresAt: new Date(invite.expiresAt).toISOString() };
      },
    });
  },
});
