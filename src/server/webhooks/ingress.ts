import { NO_WEBHOOK_SECRET_LOG } from '../../shared/log-line.ts';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { sendJson } from '../kernel/answer.ts';
import { observe, observed, type WebhookDeliveryObserved } from '../kernel/observe.ts';
import type { ReceivedBody, RouteBody } from '../kernel/body.ts';
import { DomainError } from '../kernel/errors.ts';
import { hmacSignature } from '../kernel/verifiers.ts';
import type { RouteVerifier } from '../kernel/registration.ts';
import { type AcceptGroup, DeliveryIntake } from './deliveries.ts';

/** The code-hosting platform's cap on a delivery. */
export const WEBHOOK_MAX_BYTES = 25 * 1024 * 1024;
const FORM = 'application/x-www-form-urlencoded';
/** What a delivery's body is: JSON or a form, taken raw (the signature is over its bytes; it is parsed where it is recorded). */
export const DELIVERY_BODY: RouteBody = { types: ['application/json', FORM], limit: WEBHOOK_MAX_BYTES, raw: true };
const HEADER_VALUE = /^[\x21-\x7e]{1,200}$/;

export interface WebhookIngressDeps {
  /** Parses, checks and writes a group of deliveries with their jobs (see DeliveryIntake). */
  accept: AcceptGroup;
  /** The most deliveries a group holds before it leaves (see DeliveryIntake); unbounded when unset. */
  maxGroup?: number;
  /** The most groups written at once (see DeliveryIntake); unbounded when unset. */
  maxInFlight?: number;
  logger: Logger;
  /** The current secret and, during rotation, the previous one; empty when none is set. */
  secrets: () => readonly string[];
}

const header = (req: IncomingMessage, name: string): string | undefined => {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
};

/**
 * POST /webhooks, answered before the HTTP application like the probes: it is
 * the gateway's hottest write path. Authenticated by HMAC only, declared as
 * the route's verifier and checked by the pipeline; every delivery is
 * committed with its job before the answer (on SQLite the job's first attempt
 * may share that commit: see webhook-thread.ts). After the checks every route
 * takes (method 405, credentials in the query 400, the webhook budget 429:
 * http/pipeline.ts), in order: a configured secret (503), then the body as the
 * route declares it (415, 413), the signature over its bytes (400); then
 * here: headers (400), payload (400).
 */
export class WebhookIngress {
  private readonly deps: WebhookIngressDeps;
  private readonly intake: DeliveryIntake;
  private unconfiguredWarnedAt = 0;
  /** The route's credential: X-Hub-Signature-256 over the raw body, with the current secret or, during rotation, the previous one. */
  readonly signature: RouteVerifier;

  constructor(deps: WebhookIngressDeps) {
    this.deps = deps;
    this.intake = new DeliveryIntake(deps.accept, { maxGroup: deps.maxGroup, maxInFlight: deps.maxInFlight });
    this.signature = hmacSignature({
      header: 'x-hub-signature-256', prefix: 'sha256=', secrets: deps.secrets,
      unconfigured: (req) => this.unconfigured(req),
      refusal: () => new DomainError('invalid', 'The X-Hub-Signature-256 signature does not match the body.'),
    });
  }

  /** Deliveries are taken only while a secret is configured to check them with (503). */
  private unconfigured(req: IncomingMessage): DomainError {
    // Said in the log (once a minute at most): deliveries arrive and every one is refused; gateway doctor reads this line.
    if (Date.now() - this.unconfiguredWarnedAt > 60_000) {
      this.unconfiguredWarnedAt = Date.now();
      this.deps.logger.warn({ address: req.socket.remoteAddress }, NO_WEBHOOK_SECRET_LOG);
    }
    return new DomainError('unavailable', 'No webhook secret is configured: gateway secrets set webhooks.github.secret');
  }

  /** Counts a delivery the pipeline refused (its signature among the reasons). */
  refused(): void {
    observe(observed.webhookDelivery, (): WebhookDeliveryObserved => ({ event: 'unverified', outcome: 'refused' }));
  }

  async handle(req: IncomingMessage, res: ServerResponse, body: ReceivedBody): Promise<void> {
    const seen: { event?: string } = {};
    let answer: unknown;
    try {
      answer = await this.process(req, body, seen);
    } catch (error) {
      observe(observed.webhookDelivery, (): WebhookDeliveryObserved => ({ event: seen.event ?? 'unverified', outcome: 'refused' }));
      throw error;
    }
    observe(observed.webhookDelivery, (): WebhookDeliveryObserved => ({ event: seen.event ?? 'unverified', outcome: (answer as { duplicate?: boolean }).duplicate ? 'duplicate' : 'accepted' }));
    sendJson(res, 200, answer);
  }

  /** Checks and records one delivery; `seen.event` is its event once its signature held (only GitHub names it then). */
  private async process(req: IncomingMessage, { type, raw }: ReceivedBody, seen: { event?: string }): Promise<unknown> {
    const event = header(req, 'x-github-event');
    const deliveryId = header(req, 'x-github-delivery');
    const hookId = header(req, 'x-github-hook-id') || undefined;
    if (!event || !deliveryId) throw new DomainError('invalid', 'X-GitHub-Event and X-GitHub-Delivery are required.');
    if (!HEADER_VALUE.test(event) || !HEADER_VALUE.test(deliveryId) || (hookId && !HEADER_VALUE.test(hookId))) {
      throw new DomainError('invalid', 'X-GitHub-Event, X-GitHub-Delivery and X-GitHub-Hook-ID must be short printable values.');
    }
    // The signature held (the pipeline checked it before anything is parsed or stored: an invalid one reserves nothing).
    seen.event = event;
    // The payload is parsed and checked (400) with the rest of its group, where it is recorded.
    return { ok: true, ...(await this.intake.accept({ event, deliveryId, hookId, text: raw.toString('utf8'), form: type === FORM })) };
  }
}
