/**
 * The string a device signs on connect, one field per line, joined with "\n"
 * and no trailing newline (see device-auth.ts). Free of Node's APIs, so the
 * Control UI's bundle signs exactly what the daemon checks.
 */
export const CANONICAL_PREFIX = 'gateway-connect/v1';

export function canonicalConnectString(fields: { nonce: string; signedAt: number; role: string; scopes: readonly string[]; clientId: string; deviceId: string }): string {
  return [CANONICAL_PREFIX, fields.nonce, String(fields.signedAt), fields.role, [...fields.scopes].sort().join(','), fields.clientId, fields.deviceId].join('\n');
}
