/** IRC naming rules the gateway needs without a connection: folding, rooms, valid targets. */

const ROOM_PREFIXES = '#&+!';

/**
 * ASCII case folding of a nick or room: the sender id. Folding more than the
 * server does would let "a{" pass for an approved "a[" on a server with ASCII
 * case mapping; folding less costs at most a second approval on a server that
 * also equates [ and { (RFC 1459).
 */
export function ircFold(name: string): string {
  return name.replace(/[A-Z]+/g, (letters) => letters.toLowerCase());
}

export const isIrcRoom = (name: string): boolean => ROOM_PREFIXES.includes(name[0] ?? '');

/** A nick or room the server would take as one target: no spaces, commas, control characters or a leading colon. */
export function checkIrcTarget(target: string): string | undefined {
  if (target.length === 0 || target.length > 64) return 'must be 1-64 characters';
  if (/[\s,\0\x01-\x1f\x7f]/.test(target) || target.startsWith(':')) return 'must not contain spaces, commas or control characters';
  return undefined;
}
