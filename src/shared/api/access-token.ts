import { randomInt } from 'node:crypto';
import { crc32 } from 'node:zlib';

/**
 * Product access tokens: "gwt_", 30 base62 characters of randomness (178 bits)
 * and a 6-character base62 CRC32 of the rest. The prefix makes a leaked token
 * recognisable (secret scanners can look for it) and the checksum lets anyone
 * tell a real token from a typo offline, without asking the gateway.
 */
export const TOKEN_PREFIX = 'gwt_';
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const RANDOM_LENGTH = 30;
const CHECKSUM_LENGTH = 6;
const SHAPE = new RegExp(`^${TOKEN_PREFIX}[0-9A-Za-z]{${RANDOM_LENGTH + CHECKSUM_LENGTH}}$`);

function base62(value: number, width: number): string {
  let text = '';
  let rest = value;
  while (rest > 0) {
    text = BASE62[rest % 62] + text;
    rest = Math.floor(rest / 62);
  }
  return text.padStart(width, '0');
}

const checksum = (body: string): string => base62(crc32(body), CHECKSUM_LENGTH);

export function generateAccessToken(): string {
  const random = Array.from({ length: RANDOM_LENGTH }, () => BASE62[randomInt(62)]).join('');
  const body = `${TOKEN_PREFIX}${random}`;
  return `${body}${checksum(body)}`;
}

/** Whether a value has the shape and checksum of an access token (it may still be unknown, expired or revoked). */
export function isWellFormedAccessToken(value: string): boolean {
  if (!SHAPE.test(value)) return false;
  const body = value.slice(0, -CHECKSUM_LENGTH);
  return checksum(body) === value.slice(-CHECKSUM_LENGTH);
}

/** What listings show instead of the token: the prefix and the last four characters. */
export const maskAccessToken = (value: string): string => `${TOKEN_PREFIX}…${value.slice(-4)}`;
