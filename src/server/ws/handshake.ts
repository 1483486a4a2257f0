import type { IncomingMessage } from 'node:http';
import { isLoopbackAddress } from '../../shared/config/exposure.ts';
import { canonicalConnectString, deviceIdFor, verifyCanonical } from '../../shared/protocol/device-auth.ts';
import type { ConnectParams, DeviceIdentity } from '../../shared/protocol/frames.ts';
import { Limits } from '../../shared/protocol/limits.ts';
import { OPERATOR_SCOPES } from '../../shared/protocol/scopes.ts';
import type { GatewayCredential } from '../auth/gateway-credential.ts';
import type { DeviceRegistry, PairingRequest } from '../pairing/device-registry.ts';
import { RpcError } from './rpc-error.ts';

/** Where a connection came from, as the handshake needs it. */
export interface Origin {
  nonce: string;
  address: string;
  /** Any Forwarded, X-Forwarded-For or X-Real-IP header: it came through a proxy. */
  viaProxy: boolean;
  /** In trusted-proxy mode, the user a trusted proxy vouches for. */
  proxyUser?: string;
}

export interface Admission {
  role: string;
  scopes: string[];
  deviceId: string;
  /** Set when the device receives its token on this connect; the client stores it. */
  deviceToken?: string;
  via: 'gateway-credential' | 'device-token' | 'invite';
  /** How the device was paired on this connect, if it was. */
  paired?: 'loopback' | 'invite';
}

export interface HandshakeDeps {
  credential: GatewayCredential;
  devices: DeviceRegistry;
  now?: () => number;
  onPairingRequested: (request: PairingRequest) => void;
  audit: (kind: string, fields: { subject?: string; address?: string; detail?: Record<string, unknown> }) => void;
}

export const originOf = (request: IncomingMessage, nonce: string, proxyUser?: string): Origin => ({
  nonce,
  address: request.socket.remoteAddress ?? 'unknown',
  viaProxy: Boolean(proxyUser || request.headers.forwarded || request.headers['x-forwarded-for'] || request.headers['x-real-ip']),
  proxyUser,
});

const unauthorized = (message: string) => new RpcError('UNAUTHORIZED', message);

function deviceProblem(device: DeviceIdentity | undefined): string | undefined {
  if (!device || typeof device !== 'object') return 'connect needs a device identity {id, publicKey, signature, signedAt, nonce}';
  for (const field of ['id', 'publicKey', 'signature', 'nonce'] as const) {
    if (typeof device[field] !== 'string' || device[field].length === 0 || device[field].length > 512) return `device.${field} must be a non-empty string`;
  }
  if (typeof device.signedAt !== 'number' || !Number.isFinite(device.signedAt)) return 'device.signedAt must be a number';
  return undefined;
}

const within = (requested: readonly string[], granted: readonly string[]) => requested.every((scope) => granted.includes(scope));

/**
 * Decides whether a connect is let in, and as what. The shared credential is
 * checked first; then the device's signature over this connection's nonce;
 * then its pairing. Throws RpcError (UNAUTHORIZED, PAIRING_REQUIRED, ...).
 */
export function admit(params: ConnectParams, origin: Origin, deps: HandshakeDeps): Admission {
  const now = deps.now?.() ?? Date.now();
  const problem = deviceProblem(params.device);
  if (problem) throw new RpcError('INVALID_REQUEST', problem);
  const device = params.device!;
  const auth = params.auth ?? {};
  const presentsShared = Boolean(auth.token || auth.password);
  if (presentsShared && !deps.credential.verify(auth)) throw unauthorized('the gateway credential is wrong');

  if (device.nonce !== origin.nonce) throw unauthorized('the device signature is not for this connection\'s challenge');
  if (Math.abs(now - device.signedAt) > Limits.maxClockSkewMs) throw unauthorized('the device signature is too old or from the future; check the clock');
  if (deviceIdFor(device.publicKey) !== device.id) throw unauthorized('the device id does not match its public key');
  const canonical = canonicalConnectString({ nonce: device.nonce, signedAt: device.signedAt, role: params.role, scopes: params.scopes, clientId: params.client.id, deviceId: device.id });
  if (!verifyCanonical(device.publicKey, canonical, device.signature)) throw unauthorized('the device signature is invalid');

  // Empty scopes ask for what the device already holds (or, for a new device, the role's default set).
  const requested = [...params.scopes];
  const claimFor = (scopes: string[]) => ({
    deviceId: device.id, publicKey: device.publicKey, role: params.role, scopes,
    clientId: params.client.id, platform: params.client.platform, address: origin.address, viaProxy: origin.viaProxy,
  });
  const defaultScopes = params.role === 'operator' ? [...OPERATOR_SCOPES] : [];

  if (!presentsShared && auth.deviceToken) {
    const known = deps.devices.verifyToken(device.id, auth.deviceToken);
    if (!known) throw unauthorized('the device token is invalid or was revoked');
    const scopes = requested.length ? requested : known.scopes;
    if (known.role !== params.role || !within(scopes, known.scopes)) return requestPairing(claimFor(scopes), origin, deps);
    deps.devices.markSeen(device.id, origin.address);
    return { role: known.role, scopes, deviceId: device.id, via: 'device-token' };
  }

  if (!presentsShared && auth.inviteCode) {
    const invite = deps.devices.redeemInvite(auth.inviteCode, device.id);
    if (!invite) throw unauthorized('the invite code is invalid, used or expired');
    const scopes = requested.length ? requested : invite.scopes;
    if (invite.role !== params.role || !within(scopes, invite.scopes)) {
      throw new RpcError('FORBIDDEN', `the invite allows role ${invite.role} with scopes ${invite.scopes.join(', ') || '(none)'}`);
    }
    deps.devices.pairDirect(claimFor(scopes), 'invite');
    deps.audit('device.paired', { subject: device.id, address: origin.address, detail: { via: 'invite', role: params.role, scopes } });
    const deviceToken = deps.devices.issueTokenIfUndelivered(device.id);
    deps.devices.markSeen(device.id, origin.address);
    return { role: params.role, scopes, deviceId: device.id, deviceToken, via: 'invite', paired: 'invite' };
  }

  // A trusted proxy's user stands in for the gateway credential; the device still needs approval, as any proxied one does.
  if (!presentsShared && deps.credential.mode !== 'none' && !(deps.credential.mode === 'trusted-proxy' && origin.proxyUser)) {
    throw unauthorized('no credential: pass the gateway token or password, or a device token');
  }

  const known = deps.devices.get(device.id);
  const current = known && known.revokedAt === null ? known : undefined;
  const scopes = requested.length ? requested : (current?.role === params.role ? current.scopes : defaultScopes);
  if (current && current.role === params.role && within(scopes, current.scopes)) {
    deps.devices.markSeen(device.id, origin.address);
    return { role: params.role, scopes, deviceId: device.id, deviceToken: deps.devices.issueTokenIfUndelivered(device.id), via: 'gateway-credential' };
  }
  if (isLoopbackAddress(origin.address) && !origin.viaProxy) {
    deps.devices.pairDirect(claimFor(scopes), 'loopback');
    deps.audit('device.paired', { subject: device.id, address: origin.address, detail: { via: 'loopback', role: params.role, scopes } });
    deps.devices.markSeen(device.id, origin.address);
    return { role: params.role, scopes, deviceId: device.id, deviceToken: deps.devices.issueTokenIfUndelivered(device.id), via: 'gateway-credential', paired: 'loopback' };
  }
  return requestPairing(claimFor(scopes), origin, deps);
}

function requestPairing(claim: Parameters<DeviceRegistry['request']>[0], origin: Origin, deps: HandshakeDeps): never {
  const request = deps.devices.request(claim);
  deps.audit('device.pair.requested', { subject: claim.deviceId, address: origin.address, detail: { requestId: request.id, role: claim.role, scopes: claim.scopes, viaProxy: origin.viaProxy } });
  deps.onPairingRequested(request);
  throw new RpcError('PAIRING_REQUIRED', `this device is not paired; approve it on the gateway host: gateway devices approve ${request.id}`, {
    requestId: request.id,
    expiresAt: request.expiresAt,
    hint: `gateway devices approve ${request.id}`,
  });
}
