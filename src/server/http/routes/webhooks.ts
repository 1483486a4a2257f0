import Router from '@koa/router';
import type { JobQueue } from '../../jobs/job-queue.ts';
import type { Store } from '../../store/database.ts';
import { DeliveryError, DeliveryIntake, parseDelivery, validateEvent } from '../../webhooks/deliveries.ts';
import { signatureMatches } from '../../webhooks/signature.ts';
import { readRawBody } from '../body.ts';
import { HttpError } from '../error-body.ts';

/** The code-hosting platform's cap on a delivery. */
export const WEBHOOK_MAX_BYTES = 25 * 1024 * 1024;
const HEADER_VALUE = /^[\x21-\x7e]{1,200}$/;

export interface WebhookRoutesDeps {
  store: Store;
  queue: JobQueue;
  /** The current secret and, during rotation, the previous one; empty when none is set. */
  secrets: () => readonly string[];
}

/** POST /webhooks: authenticated by HMAC only, recorded durably, processed later by the job worker. */
export function webhookRoutes(deps: WebhookRoutesDeps): Router {
  const router = new Router();
  const intake = new DeliveryIntake(deps.store, deps.queue);
  router.post('/webhooks', async (ctx) => {
    const secrets = deps.secrets();
    if (secrets.length === 0) throw new HttpError(503, 'No webhook secret is configured: gateway secrets set webhooks.github.secret');
    const raw = await readRawBody(ctx, { limit: WEBHOOK_MAX_BYTES, types: ['application/json', 'application/x-www-form-urlencoded'] });
    const event = ctx.get('x-github-event');
    const deliveryId = ctx.get('x-github-delivery');
    const hookId = ctx.get('x-github-hook-id') || undefined;
    if (!event || !deliveryId) throw new HttpError(400, 'X-GitHub-Event and X-GitHub-Delivery are required.');
    if (!HEADER_VALUE.test(event) || !HEADER_VALUE.test(deliveryId) || (hookId && !HEADER_VALUE.test(hookId))) {
      throw new HttpError(400, 'X-GitHub-Event, X-GitHub-Delivery and X-GitHub-Hook-ID must be short printable values.');
    }
    // The signature is checked before anything is parsed or stored: an invalid one reserves nothing.
    if (!signatureMatches(raw, ctx.get('x-hub-signature-256') || undefined, secrets)) {
      throw new HttpError(400, 'The X-Hub-Signature-256 signature does not match the body.');
    }
    let parsed;
    try {
      parsed = parseDelivery(raw, ctx.is('application/x-www-form-urlencoded') === 'application/x-www-form-urlencoded');
      validateEvent(event, parsed.body);
    } catch (error) {
      if (error instanceof DeliveryError) throw new HttpError(400, error.message);
      throw error;
    }
    const accepted = await intake.accept({ event, deliveryId, hookId, json: parsed.json });
    ctx.status = 200;
    ctx.body = { ok: true, ...accepted };
  });
  return router;
}
