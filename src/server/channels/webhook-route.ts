/**
 * The address platforms post their webhook deliveries to
 * (/channels/<channel>/<account>/webhook: Telegram's webhook mode, Slack's
 * Events API), handed as bytes to the channel account it names, which checks
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

  ctx.http.document({
    paths: {
      '/channels/{channel}/{account}/webhook': {
        post: {
          summary: 'a platform\'s webhook delivery for a channel account (Telegram with channels.<id>.webhookUrl, Slack with channels.<id>.events http); answered 2xx only once stored',
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
    },
  });
}
