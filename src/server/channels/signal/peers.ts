/**
 * How Signal names whom a message goes to: a person by their phone number
 * (E.164, +15550100) or their account's ACI (a UUID, for someone whose number
 * Signal does not show), a group by its id (the base64 of its 32 bytes, or of
 * 16 for an old group). Loaded with the channels module: the folding is
 * needed while the channel is not running.
 */

export const PHONE = /^\+[1-9]\d{6,14}$/;
export const ACI = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
export const GROUP_ID = /^(?:[A-Za-z0-9+/]{43}=|[A-Za-z0-9+/]{22}==)$/;

/** The one spelling of a peer: a number without its spaces, dashes and brackets, an ACI in lower case, a group id as it is. */
export function signalPeer(peer: string): string {
  const trimmed = peer.trim();
  if (GROUP_ID.test(trimmed)) return trimmed;
  if (/^\+[\d\s().-]+$/.test(trimmed)) return trimmed.replace(/[\s().-]/g, '');
  return ACI.test(trimmed.toLowerCase()) ? trimmed.toLowerCase() : trimmed;
}

export const isGroupId = (peer: string): boolean => GROUP_ID.test(peer.trim());

/** Why a peer cannot be sent to; undefined when it can. */
export function signalPeerProblem(peer: string): string | undefined {
  const folded = signalPeer(peer);
  return PHONE.test(folded) || ACI.test(folded) || GROUP_ID.test(folded) ? undefined : 'is not a Signal number (+15550100), account id (a UUID) or group id (base64)';
}
