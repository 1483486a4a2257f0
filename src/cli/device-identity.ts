import { canonicalConnectString, generateDeviceKey, loadDeviceKey, signCanonical, type DeviceKey } from '../shared/protocol/device-auth.ts';
import type { DeviceIdentity } from '../shared/protocol/frames.ts';
import type { SecretStore } from '../shared/secrets/secret-store.ts';

export const DEVICE_KEY_SECRET = 'device.key';

/** This installation's device key for a profile, made on first use and kept in the profile's secret store. */
export async function deviceKey(store: SecretStore): Promise<DeviceKey> {
  let serialised = await store.get(DEVICE_KEY_SECRET);
  if (!serialised) {
    serialised = generateDeviceKey();
    try {
      await store.set(DEVICE_KEY_SECRET, serialised);
    } catch (error) {
      // A store that cannot keep it now (a full disk): this run connects as a new device, which its credential still lets in.
      process.stderr.write(`Warning: this CLI's device key could not be saved (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}); it connects with a one-time identity.\n`);
    }
  }
  return loadDeviceKey(serialised);
}

/** The signed identity a connect carries, bound to the server's challenge. */
export function signIdentity(key: DeviceKey, fields: { nonce: string; role: string; scopes: readonly string[]; clientId: string }): DeviceIdentity {
  const signedAt = Date.now();
  const signature = signCanonical(key, canonicalConnectString({ ...fields, signedAt, deviceId: key.id }));
  return { id: key.id, publicKey: key.publicKey, signature, signedAt, nonce: fields.nonce };
}
