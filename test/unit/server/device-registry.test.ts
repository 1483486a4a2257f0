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

  it('expires pending requests after five minutes', async () => {
    const request = await registry.request(claim());
    expect(await registry.pending()).to.have.length(1);
    now += 5 * 60_000 + 1;
    expect(await registry.pending()).to.have.length(0);
    expect(await registry.approve(request.id, 'op')).to.equal(undefined);
  });

  it('replaces a pending request when the device retries with other scopes, and reuses it otherwise', async () => {
    const device = newDevice();
    const first = await registry.request(claim(device));
    expect((await registry.request(claim(device))).id).to.equal(first.id);
    const second = await registry.request(claim(device, ['operator.read', 'operator.write']));
    expect(second.id).to.not.equal(first.id);
    expect((await registry.pending()).map((request) => request.id)).to.deep.equal([second.id]);
  });

  it('stores device tokens hashed, hands each out once, and forgets them on revocation', async () => {
    const device = newDevice();
    const request = await registry.request(claim(device));
    await registry.approve(request.id, 'op');
    const token = (await registry.issueTokenIfUndelivered(device.id))!;
    expect(await registry.issueTokenIfUndelivered(device.id)).to.equal(undefined);
    const row = (await store.get<{ token_hash: string }>('SELECT token_hash FROM devices WHERE id = ?', device.id))!;
    expect(row.token_hash).to.not.include(token);
    expect(row.token_hash).to.have.length(64);
    expect((await registry.verifyToken(device.id, token))?.id).to.equal(device.id);
    expect(await registry.verifyToken(device.id, `${token}x`)).to.equal(undefined);
    await registry.revoke(device.id);
    expect(await registry.verifyToken(device.id, token)).to.equal(undefined);
  });

  it('hands a device its token once however many connects ask at the same moment', async () => {
    const device = newDevice();
    await registry.pairDirect(claim(device), 'loopback');
    const tokens = await Promise.all(Array.from({ length: 5 }, () => registry.issueTokenIfUndelivered(device.id)));
    expect(tokens.filter((token) => token !== undefined)).to.have.length(1);
  });

  it('redeems an invite exactly once, and never after it expires', async () => {
    const invite = await registry.createInvite('operator', ['operator.read'], 60_000);
    expect(await registry.redeemInvite(invite.code.toLowerCase(), 'd1')).to.deep.equal({ role: 'operator', scopes: ['operator.read'] });
    expect(await registry.redeemInvite(invite.code, 'd2')).to.equal(undefined);
    const later = await registry.createInvite('operator', [], 60_000);
    now += 60_001;
    expect(await registry.redeemInvite(later.code, 'd3')).to.equal(undefined);
  });
});
