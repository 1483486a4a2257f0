/**
 * What a WhatsApp account checks before it reads anything Meta sends: the
 * subscription handshake's verify token (GET) and a delivery's
 * X-Hub-Signature-256 (HMAC-SHA256 of the raw body with the app secret,
 * compared in constant time); and how a person and a reply's recipient are
 * written.
 */
import { createHmac } from 'node:crypto';
import type { Logger } from 'pino';
import type { ChannelRequest, ChannelResponse } from '../../kernel/channel.ts';
import { refusal, sameSecret } from '../webhook.ts';

/** Why a delivery is refused before it is read (not set up, not signed, signed otherwise), or nothing. */
function signatureRefusal(request: ChannelRequest, secret: string | undefined): ChannelResponse | undefined {
  if (secret === undefined) return refusal(503, 'unavailable', 'This account is not set up to take deliveries yet.');
  const signature = request.headers['x-hub-signature-256'];
  if (typeof signature !== 'string') return refusal(401, 'unauthorized', 'The request is not signed (X-Hub-Signature-256).');
  const expected = `sha256=${createHmac('sha256', secret).update(request.body).digest('hex')}`;
  if (!sameSecret(signature.trim().toLowerCase(), expected)) return refusal(401, 'unauthorized', 'The request\'s signature does not match the app secret.');
  return undefined;
}

/**
 * Whether a request came from Meta, before anything of it is read: the
 * subscription handshake's verify token (GET), a delivery's signature (POST).
 */
export function metaRefusal(request: ChannelRequest, secrets: { appSecret?: string; verifyToken?: string }, log: Pick<Logger, 'warn'>): ChannelResponse | undefined {
  return request.method === 'GET' ? handshakeRefusal(request.query ?? {}, secrets.verifyToken, log) : signatureRefusal(request, secrets.appSecret);
}

/** Why Meta's check of the address (hub.mode=subscribe) is refused: not set up, not a subscription request, or a verify token that does not match. */
function handshakeRefusal(query: Record<string, string>, expected: string | undefined, log: Pick<Logger, 'warn'>): ChannelResponse | undefined {
  if (expected === undefined) return refusal(503, 'unavailable', 'This account is not set up to verify its address yet.');
  const token = query['hub.verify_token'];
  if (query['hub.mode'] !== 'subscribe' || typeof query['hub.challenge'] !== 'string' || typeof token !== 'string') {
    return refusal(400, 'bad_request', 'Not a subscription request: hub.mode=subscribe, hub.verify_token and hub.challenge are expected.');
  }
  if (!sameSecret(token, expected)) {
    log.warn('a subscription request with a verify token that does not match; refused');
    return refusal(403, 'forbidden', 'The verify token does not match.');
  }
  return undefined;
}

/** Meta checking the address, its verify token matched (metaRefusal): its challenge echoed. */
export function handshake(query: Record<string, string>, log: Pick<Logger, 'info'>): ChannelResponse {
  const challenge = query['hub.challenge'] ?? '';
  // Meta's challenge is a number; nothing else is echoed back.
  if (!/^[A-Za-z0-9._-]{1,256}$/.test(challenge)) return refusal(400, 'bad_request', 'The challenge is not one Meta sends.');
  log.info('Meta verified the webhook address');
  return { status: 200, body: challenge };
}

/** A reply's recipient: a person's WhatsApp id, and the message it answers (`<wa_id>/<wamid>`), when it names one. */
export function recipientOf(to: string): { customer: string; context?: string } {
  const slash = to.indexOf('/');
  const customer = (slash === -1 ? to : to.slice(0, slash)).replace(/[^\d]/g, '');
  return slash === -1 ? { customer } : { customer, context: to.slice(slash + 1).trim() };
}

/** A person as WhatsApp writes them: their number's digits. */
export const normalizeWhatsAppPeer = (peer: string): string => peer.split('/')[0]!.replace(/[^\d]/g, '');
