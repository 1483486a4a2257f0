/** Ed25519 and SHA-256 in plain JavaScript, for pages that are not a secure context (no WebCrypto there). */
import * as ed from '@noble/ed25519';
import { sha256, sha512 } from '@noble/hashes/sha2.js';

ed.hashes.sha512 = sha512;

export const fallback = {
  secretKey: (): Uint8Array => ed.utils.randomSecretKey(),
  publicKey: (secret: Uint8Array): Uint8Array => ed.getPublicKey(secret),
  sign: (message: Uint8Array, secret: Uint8Array): Uint8Array => ed.sign(message, secret),
  sha256: (bytes: Uint8Array): Uint8Array => sha256(bytes),
};
