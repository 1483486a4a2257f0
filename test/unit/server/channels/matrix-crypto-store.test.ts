import { expect } from 'chai';
import { serialize } from 'node:v8';
import { indexedDb, readSnapshot, restoreSnapshot, snapshotOf } from '../../../../src/server/channels/matrix/crypto-store.ts';

/** The Matrix crypto library's store, written out and put back, with the library itself. */
describe('matrix: the encryption store kept between starts', function () {
  this.timeout(60_000);
  const owner = { userId: '@bot:example.test', deviceId: 'BOTDEVICE' };

  const open = async (store: string, passphrase: string | undefined) => {
    await indexedDb();
    const sdk = await import('@matrix-org/matrix-sdk-crypto-wasm');
    await sdk.initAsync();
    const handle = await sdk.StoreHandle.open(store, passphrase);
    return { sdk, machine: await sdk.OlmMachine.initFromStore(new sdk.UserId(owner.userId), new sdk.DeviceId(owner.deviceId), handle) };
  };

  it('puts a device back as it was (its identity keys, its uploaded keys), opens only with its passphrase, and holds no key in the clear', async () => {
    const { sdk, machine } = await open('unit-a', 'the passphrase');
    const identity = machine.identityKeys.ed25519.toBase64();
    const upload = (await machine.outgoingRequests()).find((request) => request.type === sdk.RequestType.KeysUpload)!;
    expect(JSON.parse(upload.body).device_keys, 'a new device uploads its keys').to.be.an('object');
    await machine.markRequestAsSent(upload.id!, upload.type, JSON.stringify({ one_time_key_counts: { signed_curve25519: 50 } }));
    const bytes = await snapshotOf('unit-a', owner);
    machine.close();

    const snapshot = readSnapshot(bytes);
    expect(snapshot).to.include(owner);
    // The library's records of the account name its device (an unlocked store shows it in the clear); locked, they do not.
    const stored = serialize(snapshot.databases).toString('latin1');
    expect(stored, 'the account\'s records are encrypted').to.not.include(owner.deviceId);
    expect(stored).to.not.include('the passphrase');

    await restoreSnapshot('unit-b', snapshot);
    const again = await open('unit-b', 'the passphrase');
    expect(again.machine.identityKeys.ed25519.toBase64(), 'the same device').to.equal(identity);
    const requests = await again.machine.outgoingRequests();
    expect(requests.some((request) => request.type === sdk.RequestType.KeysUpload && JSON.parse(request.body).device_keys), 'its keys are known to be uploaded').to.equal(false);
    again.machine.close();

    await restoreSnapshot('unit-c', snapshot);
    let refused: unknown;
    await open('unit-c', 'another passphrase').then(({ machine: opened }) => opened.close(), (error: unknown) => {
      refused = error;
    });
    expect(refused, 'a wrong passphrase does not open it').to.be.instanceOf(Error);
  });

  it('a store opened without a passphrase shows the device in the clear (what the check above would catch)', async () => {
    const { sdk, machine } = await open('unit-plain', undefined);
    const upload = (await machine.outgoingRequests()).find((request) => request.type === sdk.RequestType.KeysUpload)!;
    await machine.markRequestAsSent(upload.id!, upload.type, JSON.stringify({ one_time_key_counts: { signed_curve25519: 50 } }));
    const stored = serialize(readSnapshot(await snapshotOf('unit-plain', owner)).databases).toString('latin1');
    machine.close();
    expect(stored).to.include(owner.deviceId);
  });

  it('refuses bytes that are not a kept store', () => {
    expect(() => readSnapshot(serialize({ something: 'else' }))).to.throw(/damaged/);
  });
});
