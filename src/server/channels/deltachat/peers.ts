/**
 * How Delta Chat names whom a message goes to. A person is their address
 * (alice@example.org) for the first key seen with it; another key that
 * comes with the same address is a person of their own, named by the
 * address and the engine's contact id (alice@example.org#14), who pairs on
 * their own: an address anyone can write into a mail does not carry the
 * trust given to the key that first used it. A group is `group:<chat id>`,
 * the engine's id of the group chat. Loaded with the channels module: the
 * folding is needed while the channel is not running.
 */

const ADDRESS = /^[^@\s<>#]{1,128}@[^@\s<>#]{1,255}$/;
const PERSON = /^([^@\s<>#]{1,128}@[^@\s<>#]{1,255})(?:#(\d{1,10}))?$/;
const GROUP = /^group:(\d{1,10})$/;

/** The one spelling of a peer: an address in lower case (its contact id kept), a group as it is. */
export function deltachatPeer(peer: string): string {
  const trimmed = peer.trim().replace(/^mailto:/i, '');
  return GROUP.test(trimmed) ? trimmed : trimmed.toLowerCase();
}

export const isGroupPeer = (peer: string): boolean => GROUP.test(peer.trim());

/** Why a peer cannot be sent to; undefined when it can. */
export function deltachatPeerProblem(peer: string): string | undefined {
  const folded = deltachatPeer(peer);
  return PERSON.test(folded) || GROUP.test(folded) ? undefined : 'is not a Delta Chat address (name@example.org) or group (group:<id>)';
}

/** A peer's parts: a group's chat id, or a person's address and (for a second key) contact id. */
export function peerParts(peer: string): { group: number } | { address: string; contact?: number } | undefined {
  const folded = deltachatPeer(peer);
  const group = GROUP.exec(folded);
  if (group) return { group: Number(group[1]) };
  const person = PERSON.exec(folded);
  if (!person) return undefined;
  return { address: person[1]!, ...(person[2] ? { contact: Number(person[2]) } : {}) };
}

export const isAddress = (value: string): boolean => ADDRESS.test(value);
