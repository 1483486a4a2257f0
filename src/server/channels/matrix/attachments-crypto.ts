/**
 * Files sent into end-to-end encrypted Matrix rooms, as the client-server API
 * says (https://spec.matrix.org/v1.11/client-server-api/#sending-encrypted-attachments):
 * the bytes encrypted with AES-256-CTR under a random key and a 128-bit
 * counter block whose low 64 bits start at zero, the SHA-256 of the
 * ciphertext noted, and only the ciphertext put in the media store. The key,
 * the IV and the hash go in the event's `file` (in place of its `url`), and
 * the event itself is encrypted with the room's Megolm session, so the
 * homeserver holds nothing it can read.
 */
import { createCipheriv, createHash, randomBytes } from 'node:crypto';
import type { OutboundFile } from '../../kernel/channel.ts';

/** An encrypted file's `file` in an event: where its ciphertext is, and what opens it. */
export type EncryptedFile = {
  url: string;
  key: { kty: 'oct'; key_ops: ['encrypt', 'decrypt']; alg: 'A256CTR'; k: string; ext: true };
  iv: string;
  hashes: { sha256: string };
  v: 'v2';
};

/** The spec's unpadded base64. */
const unpadded = (bytes: Uint8Array): string => Buffer.from(bytes).toString('base64').replace(/=+$/, '');

/** A file's bytes encrypted for an encrypted room: the ciphertext to upload, and what its event's `file` holds but its address. */
export function encryptAttachment(data: Uint8Array): { ciphertext: Uint8Array; file: Omit<EncryptedFile, 'url'> } {
  const key = randomBytes(32);
  // The high 64 bits random, the low 64 bits (the counter) zero: a file never wraps the counter into the random half.
  const iv = Buffer.concat([randomBytes(8), Buffer.alloc(8)]);
  const cipher = createCipheriv('aes-256-ctr', key, iv);
  const ciphertext = Buffer.concat([cipher.update(data), cipher.final()]);
  return {
    ciphertext,
    file: {
      key: { kty: 'oct', key_ops: ['encrypt', 'decrypt'], alg: 'A256CTR', k: key.toString('base64url'), ext: true },
      iv: unpadded(iv),
      hashes: { sha256: unpadded(createHash('sha256').update(ciphertext).digest()) },
      v: 'v2',
    },
  };
}

/** Uploads a file's ciphertext (no name and no media type the homeserver could read) and returns the event's `file`. */
export async function uploadEncrypted(upload: (type: string, data: Uint8Array) => Promise<string>, file: OutboundFile): Promise<EncryptedFile> {
  const sealed = encryptAttachment(file.data);
  const url = await upload('application/octet-stream', sealed.ciphertext);
  return { url, ...sealed.file };
}
