import { expect } from 'chai';
import { DeviceRegistry } from '../../../src/server/pairing/device-registry.ts';
import type { Store } from '../../../src/server/store/database.ts';
import { freshStore } from '../../support/store.ts';
import { newDevice } from '../../support/ws-client.ts';

describe('device registry', () => {
  const current = freshStore();
  let store: Store;
  let now: number;
  let registry: DeviceRegistry;
  const claim = (device = newDevice(), scopes = ['operator.read']) => ({
    deviceId: device.id, publicKey: device.publicKey, role: 'operator', scopes, clientId: 'c', platform: 'linux', address: '10.0.0.2', viaProxy: false,
  });

  beforeEach(() => {
    store = current();
    now = 1_000_000;
    registry = new DeviceRegistry(store, () => now);
  });

  it('expires pending requests after five minutes', () => {
    const request = registry.request(claim());
    expect(registry.pending()).to.have.length(1);
    now += 5 * 60_000 + 1;
    expect(registry.pending()).to.have.length(0);
    expect(registry.approve(request.id, 'op')).to.equal(undefined);
  });

  it('replaces a pending request when the device retries with other scopes, and reuses it otherwise', () => {
    const device = newDevice();
    const first = registry.request(claim(device));
    expect(registry.request(claim(device)).id).to.equal(first.id);
    const second = registry.request(claim(device, ['operator.read', 'operator.write']));
    expect(second.id).to.not.equal(first.id);
    expect(registry.pending().map((request) => request.id)).to.deep.equal([second.id]);
  });

  it('stores device tokens hashed, hands each out once, and forgets them on revocation', () => {
    const device = newDevice();
    const request = registry.request(claim(device));
    registry.approve(request.id, 'op');
    const token = registry.issueTokenIfUndelivered(device.id)!;
    expect(registry.issueTokenIfUndelivered(device.id)).to.equal(undefined);
    const row = store.engine.prepare('SELECT token_hash FROM devices WHERE id = ?').get(device.id) as { token_hash: string };
    expect(row.token_hash).to.not.include(token);
    expect(row.token_hash).to.have.length(64);
    expect(registry.verifyToken(device.id, token)?.id).to.equal(device.id);
    expect(registry.verifyToken(device.id, `${token}x`)).to.equal(undefined);
    registry.revoke(device.id);
    expect(registry.verifyToken(device.id, token)).to.equal(undefined);
  });

  it('redeems an invite exactly once, and never after it expires', () => {
    const invite = registry.createInvite('operator', ['operator.read'], 60_000);
    expect(registry.redeemInvite(invite.code.toLowerCase(), 'd1')).to.deep.equal({ role: 'operator', scopes: ['operator.read'] });
    expect(registry.redeemInvite(invite.code, 'd2')).to.equal(undefined);
    const later = registry.createInvite('operator', [], 60_000);
    now += 60_001;
    expect(registry.redeemInvite(later.code, 'd3')).to.equal(undefined);
  });
});
