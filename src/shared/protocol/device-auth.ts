import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, sign, verify, type KeyObject } from 'node:crypto';

/**
 * Device identity: an Ed25519 key pair per CLI installation and profile.
 *
 * The device id is derived from the public key:
 *   id = base64url(sha256(raw 32-byte public key))
 *
 * On `connect` the device signs this canonical string, one field per line,
 * joined with "\n" and no trailing newline:
 *
 *   gateway-connect/v1
 *   <nonce from connect.challenge>
 *   <signedAt: milliseconds since the epoch, decimal>
 *   <role>
 *   <scopes, sorted, joined with ",">
 *   <client.id>
 *   <device id>
 *
 * The server checks that the nonce is the one it sent on this connection
 * (a reused or foreign nonce fails), that signedAt is within the allowed clock
 * skew, that the id matches the public key, and the signature.
 */
export { CANONICAL_PREFIX, canonicalConnectString } from './connect-string.ts';

export interface DeviceKey {
  id: string;
  /** base64url of the raw public key */
  publicKey: string;
  privateKey: KeyObject;
}

export function deviceIdFor(publicKey: string): string {
  return createHash('sha256').update(Buffer.from(publicKey, 'base64url')).digest('base64url');
}


/** A new key, serialised as a private JWK string for the secret store. */
export function generateDeviceKey(): string {
  const { privateKey } = generateKeyPairSync('ed25519');
  return JSON.stringify(privateKey.export({ format: 'jwk' }));
}

export function loadDeviceKey(serialised: string): DeviceKey {
  const privateKey = createPrivateKey({ key: JSON.parse(serialised), format: 'jwk' });
  const publicKey = createPublicKey(privateKey).export({ format: 'jwk' }).x!;
  return { id: deviceIdFor(publicKey), publicKey, privateKey };
}

export const signCanonical = (key: DeviceKey, canonical: string): string =>
  sign(null, Buffer.from(canonical), key.privateKey).toString('base64url');

/** Whether a signature over the canonical string was made by the public key. */
export function verifyCanonical(publicKey: string, canonical: string, signature: string): boolean {
  try {
    const raw = Buffer.from(publicKey, 'base64url');
    if (raw.length !== 32) return false;
    const key = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: publicKey }, format: 'jwk' });
    return verify(null, Buffer.from(canonical), key, Buffer.from(signature, 'base64url'));
  } catch {
    return false;
  }
}
