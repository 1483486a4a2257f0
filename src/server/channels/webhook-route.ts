/**
 * The address platforms post their webhook deliveries to
 * (/channels/<channel>/<account>/webhook: Telegram's webhook mode, Slack's
 * Events API, WhatsApp; a GET for WhatsApp's subscription handshake), and
 * where Slack posts a button pressed (/interactivity). Each route declares
 * the channel's own check as its verifier (Channel.verify: a signature over
 * the raw bytes, a secret token, the handshake's verify token), which the
 * HTTP pipeline runs once the bytes are read (415, 413 first) and before the
 * handler: the channel's receive() sees only verified requests, nothing of a
 * refused one parsed or stored.
 */
import type { IncomingMessage } from 'node:http';
import { errorResponse } from '../kernel/api-doc.ts';
import type { ChannelRequest } from '../kernel/channel.ts';
import type { ModuleContext, RouteContext, RouteVerifier } from '../kernel/module.ts';
import type { ChannelManager } from './manager.ts';
import { refusalError } from './webhook.ts';

/** Largest webhook delivery a platform may post (Telegram's updates and Slack's events are a few KB). */
const WEBHOOK_MAX_BYTES = 1024 * 1024;

type Kind = 'delivery' | 'interaction' | 'handshake';

/** The channel and account a request's path names (/channels/<channel>/<account>/<...>), as the router decoded them. */
function targetOf(req: IncomingMessage): { channel: string; account: string } {
  const url = req.url ?? '/';
  const [, channel = '', account = ''] = url.slice(0, url.includes('?') ? url.indexOf('?') : url.length).split('/').filter(Boolean).map((segment) => {
    try {
      return decodeURIComponent(segment);
    } catch {
      return segment;
    }
  });
  return { channel, account };
}

/** The request as a channel reads it. */
function requestOf(req: IncomingMessage, account: string, kind: Kind, body: Buffer): ChannelRequest {
  if (kind === 'handshake') {
    const query = req.url?.includes('?') ? req.url.slice(req.url.indexOf('?') + 1) : '';
    return { account, method: 'GET', query: Object.fromEntries(new URLSearchParams(query)), headers: req.headers, body };
  }
  return { account, headers: req.headers, body, ...(kind === 'interaction' ? { interaction: true } : {}) };
}

/** The channel's check of a request, as the route's verifier: over the raw bytes once read, or (a GET, which has none) over the headers and query. */
function channelVerifier(channels: ChannelManager, kind: Kind): RouteVerifier {
  const verify = (req: IncomingMessage, body: Buffer): void => {
    const { channel, account } = targetOf(req);
    const request = requestOf(req, account, kind, body);
    const target = channels.webhookTarget(channel, request);
    const refused = 'refused' in target ? target.refused : target.channel.verify?.(request);
    if (refused) throw refusalError(refused);
  };
  return kind === 'handshake' ? { headers: (req) => verify(req, Buffer.alloc(0)) } : { body: (req, received) => verify(req, received.raw) };
}

/** Hands a verified request to the channel that takes it, and answers what it says. */
function handOver(channels: ChannelManager, kind: Kind) {
  return async (http: RouteContext): Promise<void> => {
    const request = requestOf(http.req, http.params.account!, kind, http.received?.raw ?? Buffer.alloc(0));
    const target = channels.webhookTarget(http.params.channel!, request);
    const answer = 'refused' in target ? target.refused : await target.channel.receive!(request);
    http.status = answer.status;
    if (typeof answer.body === 'string') http.type = 'text/plain';
    http.body = answer.body ?? {};
  };
}

export function registerWebhookRoute(ctx: ModuleContext, channels: ChannelManager): void {
  ctx.http.route({
    method: 'POST', path: '/channels/:channel/:account/webhook', auth: { verify: channelVerifier(channels, 'delivery') },
    // Read by the pipeline, left as bytes: the channel's verifier checks its signature over them before anything parses them.
    body: { types: ['application/json'], limit: WEBHOOK_MAX_BYTES, raw: true },
    handler: handOver(channels, 'delivery'),
  });

  // A button pressed, posted where the platform posts interactions (Slack's interactivity request URL): a signed form.
  ctx.http.route({
    method: 'POST', path: '/channels/:channel/:account/interactivity', auth: { verify: channelVerifier(channels, 'interaction') },
    body: { types: ['application/x-www-form-urlencoded'], limit: WEBHOOK_MAX_BYTES, raw: true },
    handler: handOver(channels, 'interaction'),
  });

  // A platform checking the address before it posts there (WhatsApp's subscription handshake).
  ctx.http.route({
    method: 'GET', path: '/channels/:channel/:account/webhook', auth: { verify: channelVerifier(channels, 'handshake') },
    handler: handOver(channels, 'handshake'),
  });

  ctx.http.document({
    paths: {
      '/channels/{channel}/{account}/webhook': {
        get: {
          summary: 'a platform checking the address before it posts there: WhatsApp\'s subscription handshake (hub.mode=subscribe, hub.verify_token, hub.challenge), answered with the challenge when the verify token matches',
          security: [],
          parameters: [
            { name: 'channel', in: 'path', required: true, schema: { type: 'string' } },
            { name: 'account', in: 'path', required: true, schema: { type: 'string' } },
            { name: 'hub.mode', in: 'query', schema: { type: 'string', enum: ['subscribe'] } },
            { name: 'hub.verify_token', in: 'query', schema: { type: 'string' } },
            { name: 'hub.challenge', in: 'query', schema: { type: 'string' } },
          ],
          responses: {
            200: { description: 'the challenge, as text', content: { 'text/plain': { schema: { type: 'string' } } } },
            400: errorResponse('not a subscription request'),
            401: errorResponse('the channel takes no such request'),
            403: errorResponse('the verify token does not match'),
            404: errorResponse('no channel account here takes webhook deliveries at this address'),
            503: errorResponse('the account is not set up yet, or another daemon of the gateway runs the channel'),
          },
        },
        post: {
          summary: 'a platform\'s webhook delivery for a channel account (Telegram with channels.<id>.webhookUrl, Slack with channels.<id>.events http, WhatsApp); answered 2xx only once stored',
          security: [],
          parameters: [
            { name: 'channel', in: 'path', required: true, schema: { type: 'string' } },
            { name: 'account', in: 'path', required: true, schema: { type: 'string' } },
          ],
          requestBody: { required: true, content: { 'application/json': { schema: { type: 'object' } } } },
          responses: {
            200: { description: 'stored (or a redelivery of what was)' },
            400: errorResponse('not JSON the platform would send'),
            401: errorResponse('the platform\'s secret token or signature is missing or wrong'),
            404: errorResponse('no channel account here takes webhook deliveries at this address'),
            413: errorResponse('over 1 MB'),
            415: errorResponse('not sent as application/json'),
            503: errorResponse('it could not be stored now, another daemon of the gateway runs the channel, or the account is not ready: the platform delivers it again'),
          },
        },
      },
      '/channels/{channel}/{account}/interactivity': {
        post: {
          summary: 'a button pressed under one of a channel account\'s messages, posted as the platform posts interactions (Slack\'s interactivity request URL: a form whose payload is the interaction, signed like its events); an approval request\'s or an agent\'s question\'s button is acted on before the answer',
          security: [],
          parameters: [
            { name: 'channel', in: 'path', required: true, schema: { type: 'string' } },
            { name: 'account', in: 'path', required: true, schema: { type: 'string' } },
          ],
          requestBody: { required: true, content: { 'application/x-www-form-urlencoded': { schema: { type: 'object', properties: { payload: { type: 'string' } } } } } },
          responses: {
            200: { description: 'acted on' },
            400: errorResponse('not an interaction the platform would send'),
            401: errorResponse('the platform\'s signature is missing or wrong'),
            404: errorResponse('no channel account here takes interactions at this address'),
            413: errorResponse('over 1 MB'),
            415: errorResponse('not sent as application/x-www-form-urlencoded'),
            503: errorResponse('it could not be handled now, or another daemon of the gateway runs the channel: the platform sends it again'),
          },
        },
      },
    },
  });
}
