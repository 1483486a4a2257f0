/**
 * What a Slack account checks before it reads anything Slack posts (Events
 * API requests, interactivity requests): the app is connected with a
 * signing secret (503 otherwise), the request carries X-Slack-Signature and
 * X-Slack-Request-Timestamp, the timestamp is within five minutes of now
 * (against replays), and the signature is HMAC-SHA256 of
 * `v0:<timestamp>:<raw body>` with the signing secret, compared in constant
 * time.
 */
import { createHmac } from 'node:crypto';
import type { ChannelRequest, ChannelResponse } from '../../kernel/channel.ts';
import { refusal, sameSecret } from '../webhook.ts';

/** How old a signed request may be (Slack's own advice: five minutes). */
const SIGNATURE_MAX_AGE_S = 300;

/** Why a request is refused before it is read, or nothing; `secret` is undefined while the app does not take requests here. */
export function slackSignatureRefusal(request: ChannelRequest, secret: string | undefined, now = Date.now()): ChannelResponse | undefined {
  if (secret === undefined) return refusal(503, 'unavailable', 'This app does not take Events API requests here, or is not connected yet.');
  const timestamp = request.headers['x-slack-request-timestamp'];
  const signature = request.headers['x-slack-signature'];
  const refused = (message: string) => refusal(401, 'unauthorized', message);
  if (typeof timestamp !== 'string' || typeof signature !== 'string') return refused('The request is not signed (X-Slack-Signature, X-Slack-Request-Timestamp).');
  if (!/^\d{1,12}$/.test(timestamp) || Math.abs(now / 1000 - Number(timestamp)) > SIGNATURE_MAX_AGE_S) return refused('The request\'s timestamp is not within five minutes of now.');
  const expected = `v0=${createHmac('sha256', secret).update(`v0:${timestamp}:`).update(request.body).digest('hex')}`;
  if (!sameSecret(signature, expected)) return refused('The request\'s signature does not match the signing secret.');
  return undefined;
}
