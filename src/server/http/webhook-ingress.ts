import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { queryCarriesCredential } from '../auth/http-auth.ts';
import type { RequestBudget } from '../auth/throttle.ts';
import type { JobQueue } from '../jobs/job-queue.ts';
import type { Store } from '../store/database.ts';
import { DeliveryError, DeliveryIntake, parseDelivery, validateEvent } from '../webhooks/deliveries.ts';
import { signatureMatches } from '../webhooks/signature.ts';
import { collectBody, mediaType } from './body.ts';
import { errorBody, HttpError } from './error-body.ts';

/** The code-hosting platform's cap on a delivery. */
export const WEBHOOK_MAX_BYTES = 25 * 1024 * 1024;
const TYPES = ['application/json', 'application/x-www-form-urlencoded'];
const HEADER_VALUE = /^[\x21-\x7e]{1,200}$/;

export interface WebhookIngressDeps {
  store: Store;
  queue: JobQueue;
  budget: RequestBudget;
  logger: Logger;
  /** The current secret and, during rotation, the previous one; empty when none is set. */
  secrets: () => readonly string[];
}

const header = (req: IncomingMessage, name: string): string | undefined => {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
};

/**
 * POST /webhooks, answered ahead of the Koa stack like the probes: it is the
 * gateway's hottest write path. Authenticated by HMAC only; every delivery is
 * committed with its job before the answer, and processed later by the job
 * worker. Checks, in order: method (405), credentials in the query (400), the
 * webhook budget (429), a configured secret (503), content type (415), size
 * (413), headers (400), signature (400), payload (400).
 */
export class WebhookIngress {
  private readonly deps: WebhookIngressDeps;
  private readonly intake: DeliveryIntake;

  constructor(deps: WebhookIngressDeps) {
    this.deps = deps;
    this.intake = new DeliveryIntake(deps.store, deps.queue);
  }

  matches(req: IncomingMessage): boolean {
    const url = req.url ?? '';
    return url === '/webhooks' || url.startsWith('/webhooks?');
  }

  handle(req: IncomingMessage, res: ServerResponse): void {
    this.process(req, res).then(
      (body) => this.send(res, 200, body),
      (error: unknown) => {
        if (error instanceof HttpError) return this.send(res, error.status, errorBody(error.status, error.message), error.headers);
        this.deps.logger.error({ err: error }, 'webhook delivery failed');
        this.send(res, 500, errorBody(500, 'An unexpected error occurred; nothing of this delivery was recorded. Redeliver it.'));
      },
    );
  }

  private send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
    if (res.headersSent) return;
    const payload = Buffer.from(JSON.stringify(body));
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': payload.length, 'cache-control': 'no-store', ...headers });
    res.end(payload);
  }

  private async process(req: IncomingMessage, res: ServerResponse): Promise<unknown> {
    if (req.method !== 'POST') throw new HttpError(405, `Method ${req.method} is not allowed on /webhooks; deliveries are POSTed.`, { allow: 'POST' });
    if (queryCarriesCredential(req.url)) throw new HttpError(400, 'Credentials are never accepted in the query string.');
    const wait = await this.deps.budget.spend(`addr:${req.socket.remoteAddress ?? 'unknown'}`);
    if (wait > 0) throw new HttpError(429, `Too many deliveries; try again in ${Math.ceil(wait / 1000)} s.`, { 'retry-after': String(Math.ceil(wait / 1000)) });
    const secrets = this.deps.secrets();
    if (secrets.length === 0) throw new HttpError(503, 'No webhook secret is configured: gateway secrets set webhooks.github.secret');
    const type = mediaType(header(req, 'content-type'));
    if (!TYPES.includes(type)) throw new HttpError(415, `Send the delivery as ${TYPES.join(' or ')}${type ? ` (got ${type})` : ''}.`);
    const raw = await collectBody(req, WEBHOOK_MAX_BYTES, () => res.setHeader('connection', 'close'));
    const event = header(req, 'x-github-event');
    const deliveryId = header(req, 'x-github-delivery');
    const hookId = header(req, 'x-github-hook-id') || undefined;
    if (!event || !deliveryId) throw new HttpError(400, 'X-GitHub-Event and X-GitHub-Delivery are required.');
    if (!HEADER_VALUE.test(event) || !HEADER_VALUE.test(deliveryId) || (hookId && !HEADER_VALUE.test(hookId))) {
      throw new HttpError(400, 'X-GitHub-Event, X-GitHub-Delivery and X-GitHub-Hook-ID must be short printable values.');
    }
    // The signature is checked before anything is parsed or stored: an invalid one reserves nothing.
    if (!signatureMatches(raw, header(req, 'x-hub-signature-256'), secrets)) {
      throw new HttpError(400, 'The X-Hub-Signature-256 signature does not match the body.');
    }
    let parsed;
    try {
      parsed = parseDelivery(raw, type === 'application/x-www-form-urlencoded');
      validateEvent(event, parsed.body);
    } catch (error) {
      if (error instanceof DeliveryError) throw new HttpError(400, error.message);
      throw error;
    }
    return { ok: true, ...(await this.intake.accept({ event, deliveryId, hookId, json: parsed.json, body: parsed.body })) };
  }
}
