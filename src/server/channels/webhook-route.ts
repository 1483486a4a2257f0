/**
 * The address platforms post their webhook deliveries to
 * (/channels/<channel>/<account>/webhook: Telegram's webhook mode, Slack's
 * Events API, WhatsApp; a GET for WhatsApp's subscription handshake), handed as bytes to the channel account it names, which checks
 * its platform's signature or secret before it reads them.
 */
import { errorResponse } from '../kernel/api-doc.ts';
import type { ModuleContext } from '../kernel/module.ts';
import type { ChannelManager } from './manager.ts';

/** Largest webhook delivery a platform may post (Telegram's updates and Slack's events are a few KB). */
const WEBHOOK_MAX_BYTES = 1024 * 1024;

export function registerWebhookRoute(ctx: ModuleContext, channels: ChannelManager): void {
  ctx.http.route({
    method: 'POST', path: '/channels/:channel/:account/webhook', auth: 'plugin',
    // Read by the pipeline, left as bytes: each platform checks its signature over them before parsing.
    body: { types: ['application/json'], limit: WEBHOOK_MAX_BYTES, raw: true },
    handler: async (http) => {
      const answer = await channels.receive(http.params.channel!, { account: http.params.account!, headers: http.req.headers, body: http.received!.raw });
      http.status = answer.status;
      http.body = answer.body ?? {};
    },
  });

  // A button pressed, posted where the platform posts interactions (Slack's interactivity request URL): a signed form.
  ctx.http.route({
    method: 'POST', path: '/channels/:channel/:account/interactivity', auth: 'plugin',
    body: { types: ['application/x-www-form-urlencoded'], limit: WEBHOOK_MAX_BYTES, raw: true },
    handler: async (http) => {
      const answer = await channels.receive(http.params.channel!, { account: http.params.account!, headers: http.req.headers, body: http.received!.raw, interaction: true });
      http.status = answer.status;
      http.body = answer.body ?? {};
    },
  });

  // A platform checking the address before it posts there (WhatsApp's subscription handshake).
  ctx.http.route({
    method: 'GET', path: '/channels/:channel/:account/webhook', auth: 'plugin',
    handler: async (http) => {
      const query = Object.fromEntries(new URLSearchParams(http.querystring));
      const answer = await channels.receive(http.params.channel!, { account: http.params.account!, method: 'GET', query, headers: http.req.headers, body: Buffer.alloc(0) });
      http.status = answer.status;
      if (typeof answer.body === 'string') http.type = 'text/plain';
      http.body = answer.body ?? {};
    },
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
