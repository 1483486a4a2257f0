import { isLoopbackAddress } from '../../shared/config/exposure.ts';
import { canonicalConnectString, deviceIdFor, verifyCanonical } from '../../shared/protocol/device-auth.ts';
import type { ConnectParams } from '../../shared/protocol/frames.ts';
import { Limits } from '../../shared/protocol/limits.ts';
import { OPERATOR_SCOPES } from '../../shared/protocol/scopes.ts';
import { DomainError } from '../kernel/errors.ts';
import type { Admission, ConnectionOrigin as Origin, CredentialView } from '../kernel/module.ts';
import type { DeviceRegistry, PairingRequest } from './device-registry.ts';

export interface HandshakeDeps {
  credential: CredentialView;
  devices: DeviceRegistry;
  now?: () => number;
  onPairingRequested: (request: PairingRequest) => void;
  audit: (kind: string, fields: { subject?: string; address?: string; detail?: Record<string, unknown> }) => Promise<void>;
}

const unauthorized = (message: string) => new DomainError('unauthorized', message);

const within = (requested: readonly string[], granted: readonly string[]) => requested.every((scope) => granted.includes(scope));

/**
 * Decides whether a connect is let in, and as what. The shared credential is
 * checked first, whatever else the frame holds; then the device's signature
 * over this connection's nonce; then its pairing. The params' shape was
 * checked against their schema before. Throws a DomainError (unauthorized,
 * pairing_required, ...).
 */
export async function admit(params: ConnectParams, origin: Origin, deps: HandshakeDeps): Promise<Admission> {
  const now = deps.now?.() ?? Date.now();
  const auth = params.auth ?? {};
  const presentsShared = Boolean(auth.token || auth.password);
  if (presentsShared && !deps.credential.verify(auth)) throw unauthorized('the gateway credential is wrong');
  if (!params.device) throw new DomainError('invalid', 'Connect needs a device identity {id, publicKey, signature, signedAt, nonce}.');
  const device = params.device;

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
    const known = await deps.devices.verifyToken(device.id, auth.deviceToken);
    if (!known) throw unauthorized('the device token is invalid or was revoked');
    const scopes = requested.length ? requested : known.scopes;
    if (known.role !== params.role || !within(scopes, known.scopes)) return requestPairing(claimFor(scopes), origin, deps);
    void deps.devices.markSeen(device.id, origin.address);
    return { role: known.role, scopes, deviceId: device.id, via: 'device-token' };
  }

  if (!presentsShared && auth.inviteCode) {
    const invite = await deps.devices.redeemInvite(auth.inviteCode, device.id);
    if (!invite) throw unauthorized('the invite code is invalid, used or expired');
    const scopes = requested.length ? requested : invite.scopes;
    if (invite.role !== params.role || !within(scopes, invite.scopes)) {
      throw new DomainError('forbidden', `The invite allows role ${invite.role} with scopes ${invite.scopes.join(', ') || '(none)'}.`);
    }
    await deps.devices.pairDirect(claimFor(scopes), 'invite');
    await deps.audit('device.paired', { subject: device.id, address: origin.address, detail: { via: 'invite', role: params.role, scopes } });
    const deviceToken = await deps.devices.issueTokenIfUndelivered(device.id);
    void deps.devices.markSeen(device.id, origin.address);
    return { role: params.role, scopes, deviceId: device.id, deviceToken, via: 'invite', paired: 'invite' };
  }

  // A trusted proxy's user stands in for the gateway credential; the device still needs approval, as any proxied one does.
  if (!presentsShared && deps.credential.mode !== 'none' && !(deps.credential.mode === 'trusted-proxy' && origin.proxyUser)) {
    throw unauthorized('no credential: pass the gateway token or password, or a device token');
  }

  const known = await deps.devices.get(device.id);
  const current = known && known.revokedAt === null ? known : undefined;
  const scopes = requested.length ? requested : (current?.role === params.role ? current.scopes : defaultScopes);
  if (current && current.role === params.role && within(scopes, current.scopes)) {
    void deps.devices.markSeen(device.id, origin.address);
    return { role: params.role, scopes, deviceId: device.id, deviceToken: await deps.devices.issueTokenIfUndelivered(device.id), via: 'gateway-credential' };
  }
  if (isLoopbackAddress(origin.address) && !origin.viaProxy) {
    await deps.devices.pairDirect(claimFor(scopes), 'loopback');
    await deps.audit('device.paired', { subject: device.id, address: origin.address, detail: { via: 'loopback', role: params.role, scopes } });
    void deps.devices.markSeen(device.id, origin.address);
    return { role: params.role, scopes, deviceId: device.id, deviceToken: await deps.devices.issueTokenIfUndelivered(device.id), via: 'gateway-credential', paired: 'loopback' };
  }
  return requestPairing(claimFor(scopes), origin, deps);
}

async function requestPairing(claim: Parameters<DeviceRegistry['request']>[0], origin: Origin, deps: HandshakeDeps): Promise<never> {
  const request = await deps.devices.request(claim);
  await deps.audit('device.pair.requested', { subject: claim.deviceId, address: origin.address, detail: { requestId: request.id, role: claim.role, scopes: claim.scopes, viaProxy: origin.viaProxy } });
  deps.onPairingRequested(request);
  throw new DomainError('pairing_required', `This device is not paired; approve it on the gateway host: gateway devices approve ${request.id}.`, {
    details: { requestId: request.id, expiresAt: request.expiresAt, hint: `gateway devices approve ${request.id}` },
  });
}
