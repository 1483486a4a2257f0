/** What the CLI and the daemon agree on about channels, pairing codes and sessions. */

export const CHANNEL_STATES = ['connected', 'connecting', 'disconnected', 'error'] as const;
export type ChannelState = (typeof CHANNEL_STATES)[number];

/** Pairing codes: 8 characters people can read aloud (no 0/O, 1/I). */
export const PAIRING_CODE_ALPHABET = 'ABCDEFGHJKLMNPQRSTUVWXYZ23456789';
export const PAIRING_CODE_LENGTH = 8;
/** A DM pairing code is valid this long. */
export const PAIRING_CODE_TTL_MS = 60 * 60_000;
/** At most this many codes wait for approval per channel account; more senders are ignored. */
export const MAX_PENDING_PER_ACCOUNT = 3;

/** Codes match case-insensitively, and people paste them with spaces or dashes. */
export function normalizePairingCode(input: string): string {
  return input.replace(/[\s-]/g, '').toUpperCase();
}

export function isPairingCode(code: string): boolean {
  return code.length === PAIRING_CODE_LENGTH && [...code].every((c) => PAIRING_CODE_ALPHABET.includes(c));
}

/** Sessions no channel holds: chat with an agent (CLI, Control UI, WebChat), the inference API, automations, delegated tasks. */
export const SESSION_SOURCES = ['api', 'automation', 'chat', 'delegate'] as const;

export type SessionKind = 'direct' | 'group';

/**
 * One session per channel, account and peer (direct), or per room (group);
 * and per agent, when a route names one other than the channel's own
 * (`irc:default:agent:helper:dm:alice`).
 */
export function sessionKey(channel: string, account: string, kind: SessionKind, peer: string, agent?: string): string {
  // A delegated task's session is named by its parent's: delegate:<parent session>:<n> (the peer).
  if (channel === 'delegate') return `delegate:${peer}`;
  return `${channel}:${account}:${agent === undefined ? '' : `agent:${agent}:`}${kind === 'direct' ? 'dm' : 'group'}:${peer}`;
}

/** Longest text an operator may send in one message. */
export const MAX_MESSAGE_CHARS = 4000;
