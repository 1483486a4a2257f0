/**
 * What a pairing decision tells: why a code cannot be decided, and, on
 * approval with notify, the sender told through the outbox (once, whatever
 * retries), waiting a while for its first attempt.
 */
import { DomainError } from '../kernel/errors.ts';
import type { DecisionFailure, DmPairingRequest } from './dm-pairing.ts';
import type { Outbox } from './outbox/outbox.ts';

/** How long an operator's send waits for its message's first attempt before answering that it is queued. */
export const SEND_WAIT_MS = 10_000;

const FAILURE_TEXT: Record<DecisionFailure, string> = {
  unknown: 'is unknown',
  expired: 'has expired',
  rejected: 'was rejected',
  approved: 'was already approved',
};

export const undecided = (channel: string, code: string, failure: DecisionFailure) =>
  new DomainError('not_found', `Pairing code ${code} on channel ${channel} ${FAILURE_TEXT[failure]}.`);

/** Tells an approved sender so; what became of it (sent, or why not yet). */
export async function tellApproved(outbox: Outbox, channel: string, request: Pick<DmPairingRequest, 'account' | 'sender' | 'code'>): Promise<{ notified: boolean; notifyError?: string }> {
  // The sender's id reaches them on every channel (a folded IRC nick, a Telegram user's chat); sent through the outbox, once.
  const id = await outbox.queue({ channel, account: request.account, to: request.sender, text: 'You are approved: this gateway now accepts your messages.', key: `pair-approved:${channel}:${request.code}` });
  if (id === undefined) return { notified: false };
  const delivery = await outbox.firstAttempt(id, SEND_WAIT_MS);
  if (delivery.status === 'sent') return { notified: true };
  return { notified: false, notifyError: delivery.status === 'pending' ? `${delivery.error ?? 'not sent yet'}; it is sent when it can be (outbox ${id})` : delivery.error ?? 'not delivered' };
}
