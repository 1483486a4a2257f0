import type { FirstAttempt, JobQueue } from '../jobs/module.ts';
import { JsonTooDeep, parseJsonWithin } from '../../shared/json.ts';
import type { Store } from '../store/database.ts';
import { PG_CLAIM_DELIVERIES, PG_DELIVERY_JOBS } from '../store/dialect.ts';

import { DomainError } from '../kernel/errors.ts';

const invalid = (message: string) => new DomainError('invalid', message);

const isObject = (value: unknown): value is Record<string, any> => value !== null && typeof value === 'object' && !Array.isArray(value);

/** The payload of a delivery, parsed and as JSON text: a JSON body, or a form body whose payload field holds the JSON. */
export function parseDelivery(text: string, form: boolean): { body: Record<string, any>; json: string } {
  if (form) {
    const field = new URLSearchParams(text).get('payload');
    if (field === null) throw invalid('A form-encoded delivery needs a payload= field.');
    text = field;
  }
  let body: unknown;
  try {
    body = parseJsonWithin(text);
  } catch (error) {
    throw invalid(error instanceof JsonTooDeep ? `The payload ${error.message}.` : 'The payload is not valid JSON.');
  }
  if (!isObject(body)) throw invalid('The payload must be a JSON object.');
  return { body, json: text };
}

/** Checks the fields the built-in handlers use. */
/**
 * Checks every field the built-in handlers read, by type, before the delivery
 * is acknowledged: a delivery whose job could never succeed is refused (400)
 * rather than accepted and failed later.
 */
export function validateEvent(event: string, body: Record<string, any>): void {
  const missing: string[] = [];
  const optionalText = (value: unknown) => value === undefined || value === null || typeof value === 'string';
  const repositoryList = (value: unknown) => value === undefined || value === null || (Array.isArray(value) && value.every((repository) => isObject(repository) && optionalText(repository.full_name)));
  if (event === 'push') {
    if (typeof body.ref !== 'string') missing.push('ref (string)');
    if (typeof body.after !== 'string') missing.push('after (string)');
    if (typeof body.repository?.full_name !== 'string') missing.push('repository.full_name (string)');
    const head = body.head_commit;
    if (head !== undefined && head !== null && !(isObject(head) && optionalText(head.id))) missing.push('head_commit (null, or an object whose id is a string)');
    if (body.commits !== undefined && body.commits !== null && !Array.isArray(body.commits)) missing.push('commits (array)');
  } else if (event === 'installation' || event === 'installation_repositories') {
    if (typeof body.action !== 'string') missing.push('action (string)');
    const installation = body.installation;
    // Installation ids are positive integers the database keeps exactly; 1.8e19 is not one.
    if (!isObject(installation) || !Number.isSafeInteger(installation.id) || installation.id <= 0) missing.push('installation.id (a positive integer)');
    else {
      if (installation.account !== undefined && installation.account !== null && !(isObject(installation.account) && optionalText(installation.account.login))) missing.push('installation.account.login (string)');
      if (!optionalText(installation.target_type)) missing.push('installation.target_type (string)');
    }
    for (const list of ['repositories', 'repositories_added', 'repositories_removed']) {
      if (!repositoryList(body[list])) missing.push(`${list} (an array of {full_name})`);
    }
  }
  if (missing.length > 0) throw invalid(`The ${event} payload lacks ${missing.join(', ')}.`);
}

export interface Accepted {
  deliveryId: string;
  jobId: string;
  duplicate: boolean;
}

/** A delivery as the intake records it: its headers and its payload as JSON text (and parsed, when the caller has it). */
export type DeliveryInput = { event: string; deliveryId: string; hookId: string | undefined; json: string; body?: Record<string, unknown> };

/** A delivery as it came, its signature checked: its headers and its body as text, not yet parsed. */
export type RawDelivery = { event: string; deliveryId: string; hookId: string | undefined; text: string; form: boolean };

/** What became of a delivery: recorded (or found recorded), or refused for its payload (a 400, with why). */
export type Outcome = Accepted | { refused: string };

/** Makes a delivery's job's first attempt as it is recorded (JobWorker.runNow); undefined queues it as usual. */
export type RunNow = (job: { id: string; kind: string; payload: unknown }) => FirstAttempt | undefined;

/** A delivery's job payload: the body as it came (already checked to be a JSON object), not parsed and serialised again. */
function jobPayload(delivery: DeliveryInput): { serialized: string; parsed: unknown } {
  return {
    serialized: `{"event":${JSON.stringify(delivery.event)},"deliveryId":${JSON.stringify(delivery.deliveryId)},"hookId":${JSON.stringify(delivery.hookId ?? null)},"body":${delivery.json}}`,
    parsed: delivery.body && { event: delivery.event, deliveryId: delivery.deliveryId, hookId: delivery.hookId ?? null, body: delivery.body },
  };
}

/**
 * The writes of one delivery and its job, inside the transaction the caller
 * holds (committed before anything answers). A redelivery (same hook id and
 * delivery id) creates nothing. Without a hook id the key is the delivery id
 * alone: stored as "", since SQL NULLs never collide.
 */
function recordDelivery(store: Store, queue: JobQueue, delivery: DeliveryInput, runNow?: RunNow): Accepted {
  const hookKey = delivery.hookId ?? '';
  // The delivery's row first, claiming its key: of two daemons taking the same delivery at once (a shared store),
  // the second waits for the first's commit and then inserts nothing.
  const jobId = queue.newId();
  const claimed = store.prepare('INSERT INTO webhook_deliveries (hook_id, delivery_id, event, received_at, job_id) VALUES (?, ?, ?, ?, ?) ON CONFLICT (hook_id, delivery_id) DO NOTHING')
    .run(hookKey, delivery.deliveryId, delivery.event, Date.now(), jobId).changes;
  if (Number(claimed) === 0) {
    const existing = store.prepare('SELECT job_id FROM webhook_deliveries WHERE hook_id = ? AND delivery_id = ?').get(hookKey, delivery.deliveryId) as { job_id: string };
    return { deliveryId: delivery.deliveryId, jobId: existing.job_id, duplicate: true };
  }
  const kind = `github.${delivery.event}`;
  const payload = jobPayload(delivery);
  const ran = runNow && payload.parsed ? runNow({ id: jobId, kind, payload: payload.parsed }) : undefined;
  queue.enqueue(kind, undefined, { id: jobId, source: delivery.deliveryId, ...payload, ran });
  return { deliveryId: delivery.deliveryId, jobId, duplicate: false };
}

/** A delivery's key, as one string. */
const deliveryKey = (hookId: string, deliveryId: string): string => `${hookId}\u0000${deliveryId}`;

type DeliveryRow = { hook_id: string; delivery_id: string; job_id: string };

/**
 * A group of deliveries on PostgreSQL, in three statements: the keys claimed
 * at once (a key claimed already, by this group or another daemon, is a
 * duplicate and answers with the first job's id), then the new jobs queued.
 * Rows go in the order of their keys: two daemons writing overlapping groups
 * then take the keys' locks in one order, and never deadlock.
 */
function recordGroup(store: Store, queue: JobQueue, deliveries: DeliveryInput[]): Accepted[] {
  const hooks = deliveries.map((delivery) => delivery.hookId ?? '');
  const keys = deliveries.map((delivery, index) => deliveryKey(hooks[index]!, delivery.deliveryId));
  const order = keys.map((_, index) => index).sort((a, b) => (keys[a]! < keys[b]! ? -1 : keys[a]! > keys[b]! ? 1 : 0));
  const ids = deliveries.map(() => queue.newId());
  const now = Date.now();
  const claimed = store.prepare(PG_CLAIM_DELIVERIES).all(order.map((index) => hooks[index]!), order.map((index) => deliveries[index]!.deliveryId),
    order.map((index) => deliveries[index]!.event), order.map(() => now), order.map((index) => ids[index]!)) as DeliveryRow[];
  const jobOf = new Map(claimed.map((row) => [deliveryKey(row.hook_id, row.delivery_id), row.job_id]));
  const missing = order.filter((index) => !jobOf.has(keys[index]!));
  if (missing.length > 0) {
    const found = store.prepare(PG_DELIVERY_JOBS).all(missing.map((index) => hooks[index]!), missing.map((index) => deliveries[index]!.deliveryId)) as DeliveryRow[];
    for (const row of found) jobOf.set(deliveryKey(row.hook_id, row.delivery_id), row.job_id);
  }
  queue.enqueueMany(order.filter((index) => jobOf.get(keys[index]!) === ids[index]).map((index) => {
    const delivery = deliveries[index]!;
    return { id: ids[index]!, kind: `github.${delivery.event}`, source: delivery.deliveryId, ...jobPayload(delivery) };
  }));
  return deliveries.map((delivery, index) => {
    const jobId = jobOf.get(keys[index]!)!;
    return { deliveryId: delivery.deliveryId, jobId, duplicate: jobId !== ids[index] };
  });
}

/**
 * Records a group of deliveries and their jobs in one transaction (no
 * savepoint per delivery: a failure fails the group anyway), committed when
 * this returns. With `runNow` (on SQLite), each new job's first attempt is
 * made in the same transaction, and its outcome committed with the delivery.
 */
export function recordDeliveries(store: Store, queue: JobQueue, deliveries: DeliveryInput[], runNow?: RunNow): Accepted[] {
  return store.transaction(() => (store.kind === 'postgres'
    ? recordGroup(store, queue, deliveries)
    : deliveries.map((delivery) => recordDelivery(store, queue, delivery, runNow))));
}

/**
 * Parses and checks a group of deliveries and records those that pass, in
 * one transaction: a delivery whose payload is refused changes nothing of the
 * others. Each parsed payload is kept for the job worker of the same thread,
 * which then need not parse it again.
 */
export function acceptDeliveries(store: Store, queue: JobQueue, raws: RawDelivery[], runNow?: RunNow): Outcome[] {
  const outcomes: Outcome[] = new Array(raws.length);
  const good: DeliveryInput[] = [];
  const places: number[] = [];
  raws.forEach((raw, index) => {
    try {
      const parsed = parseDelivery(raw.text, raw.form);
      validateEvent(raw.event, parsed.body);
      good.push({ event: raw.event, deliveryId: raw.deliveryId, hookId: raw.hookId, json: parsed.json, body: parsed.body });
      places.push(index);
    } catch (error) {
      if (!(error instanceof DomainError)) throw error;
      outcomes[index] = { refused: error.message };
    }
  });
  if (good.length > 0) recordDeliveries(store, queue, good, runNow).forEach((accepted, index) => { outcomes[places[index]!] = accepted; });
  return outcomes;
}

interface Pending {
  delivery: RawDelivery;
  resolve: (accepted: Accepted) => void;
  reject: (error: unknown) => void;
}

/** What parses, checks and writes a group of deliveries: in the daemon's thread (answers at once) or in another (answers later). */
export type AcceptGroup = (deliveries: RawDelivery[]) => Outcome[] | Promise<Outcome[]>;

/**
 * Group commit: deliveries that arrive together are written in one
 * transaction, and each is answered only after that transaction commits. The
 * commit is the costly part of a delivery; sharing it among concurrent ones
 * keeps every answer durable at a fraction of the cost. A failed commit fails
 * the whole group and leaves nothing of it behind.
 *
 * With `maxGroup` (when another thread writes), a group leaves as soon as it
 * is that large: that thread starts on the first deliveries of a burst while
 * this one still reads the rest, instead of each waiting for the other.
 */
export class DeliveryIntake {
  private pending: Pending[] = [];
  private readonly acceptGroup: AcceptGroup;
  private readonly maxGroup: number;

  constructor(acceptGroup: AcceptGroup, options: { maxGroup?: number } = {}) {
    this.acceptGroup = acceptGroup;
    this.maxGroup = options.maxGroup ?? Infinity;
  }

  /** Resolves once the delivery is committed with its job; rejects with a 400 for a payload it refuses. */
  accept(delivery: RawDelivery): Promise<Accepted> {
    return new Promise((resolve, reject) => {
      const size = this.pending.push({ delivery, resolve, reject });
      if (size === 1) setImmediate(() => this.flush());
      else if (size >= this.maxGroup) this.flush();
    });
  }

  private flush(): void {
    // A group that left when it was full leaves nothing for its turn.
    if (this.pending.length === 0) return;
    const group = this.pending;
    this.pending = [];
    const fail = (error: unknown) => {
      for (const { reject } of group) reject(error);
    };
    const answer = (outcomes: Outcome[]) => group.forEach(({ resolve, reject }, index) => {
      const outcome = outcomes[index]!;
      if ('refused' in outcome) reject(invalid(outcome.refused));
      else resolve(outcome);
    });
    let outcomes: Outcome[] | Promise<Outcome[]>;
    try {
      outcomes = this.acceptGroup(group.map(({ delivery }) => delivery));
    } catch (error) {
      fail(error);
      return;
    }
    if (Array.isArray(outcomes)) answer(outcomes);
    else outcomes.then(answer, fail);
  }
}
