import { createHmac, timingSafeEqual } from 'node:crypto';

const SIGNATURE = /^sha256=([0-9a-f]{64})$/i;

/**
 * Whether X-Hub-Signature-256 is an HMAC-SHA256 of the raw body under one of
 * the secrets (the current one and, during rotation, the previous one).
 * Compared in constant time over the raw bytes, never re-serialised JSON.
 */
export function signatureMatches(raw: Buffer, header: string | undefined, secrets: readonly string[]): boolean {
  const match = header ? SIGNATURE.exec(header.trim()) : null;
  if (!match) return false;
  const given = Buffer.from(match[1]!.toLowerCase(), 'hex');
  let ok = false;
  for (const secret of secrets) {
    const expected = createHmac('sha256', secret).update(raw).digest();
    // Every secret is checked, so the time taken does not say which one matched.
    ok = timingSafeEqual(expected, given) || ok;
  }
  return ok;
}
