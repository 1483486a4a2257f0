import { expect } from 'chai';
import { createDecipheriv, createHash } from 'node:crypto';
import * as sdk from '@matrix-org/matrix-sdk-crypto-wasm';
import { encryptAttachment, uploadEncrypted } from '../../../../src/server/channels/matrix/attachments-crypto.ts';

describe('matrix: files encrypted for encrypted rooms', () => {
  const bytes = Buffer.from('the secret quarterly figures: 42\n'.repeat(100));

  it('encrypts with AES-256-CTR under a random key and an IV whose counter half is zero, and notes the ciphertext\'s SHA-256, as the spec says', () => {
    const { ciphertext, file } = encryptAttachment(bytes);
    expect(file.v).to.equal('v2');
    expect(file.key).to.deep.equal({ kty: 'oct', key_ops: ['encrypt', 'decrypt'], alg: 'A256CTR', k: file.key.k, ext: true });
    expect(file.key.k).to.match(/^[A-Za-z0-9_-]{43}$/);
    expect(file.iv).to.match(/^[A-Za-z0-9+/]{22}$/);
    const iv = Buffer.from(file.iv, 'base64');
    expect(iv.subarray(8).equals(Buffer.alloc(8))).to.equal(true);
    expect(file.hashes.sha256).to.equal(createHash('sha256').update(ciphertext).digest('base64').replace(/=+$/, ''));
    expect(Buffer.from(ciphertext).equals(bytes)).to.equal(false);
    const decipher = createDecipheriv('aes-256-ctr', Buffer.from(file.key.k, 'base64url'), iv);
    expect(Buffer.concat([decipher.update(ciphertext), decipher.final()]).equals(bytes)).to.equal(true);
    const again = encryptAttachment(bytes);
    expect(again.file.key.k, 'a key of its own for each file').to.not.equal(file.key.k);
    expect(again.file.iv).to.not.equal(file.iv);
  });

  it('is what the Matrix crypto library decrypts (its hash checked), and uploads only the ciphertext as octets', async () => {
    let uploaded: { type: string; data: Uint8Array } | undefined;
    const file = await uploadEncrypted(async (type, data) => {
      uploaded = { type, data };
      return 'mxc://example.test/abc';
    }, { name: 'figures.txt', mimeType: 'text/plain', data: bytes });
    expect(file.url).to.equal('mxc://example.test/abc');
    expect(uploaded!.type).to.equal('application/octet-stream');
    const info = JSON.stringify({ v: file.v, key: file.key, iv: file.iv, hashes: file.hashes });
    expect(Buffer.from(sdk.Attachment.decrypt(new sdk.EncryptedAttachment(uploaded!.data, info))).equals(bytes)).to.equal(true);
    const tampered = Uint8Array.from(uploaded!.data);
    tampered[0]! ^= 1;
    expect(() => sdk.Attachment.decrypt(new sdk.EncryptedAttachment(tampered, info)), 'a changed ciphertext fails its hash').to.throw();
  });
});
