import type { FirstAttempt, JobQueue } from '../jobs/module.ts';
import { JsonTooDeep, parseJsonWithin } from '../../shared/json.ts';
import type { Store, Tx } from '../store/database.ts';
import { pruneRows } from '../store/retention.ts';
import { PG_CLAIM_DELIVERIES, PG_DELIVERY_JOBS } from './delivery-sql.ts';

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

/**
 * Makes the first attempts of a group's new jobs as they are recorded, in
 * their transaction (JobWorker.runAtOnce); the jobs it leaves out are queued
 * as usual.
 */
export type RunAtOnce = (jobs: { id: string; kind: string; payload: unknown }[], tx: Tx) => Promise<Map<string, FirstAttempt>>;

/** A delivery's job payload: the body as it came (already checked to be a JSON object), not parsed and serialised again. */
function jobPayload(delivery: DeliveryInput): { serialized: string; parsed: unknown } {
  return {
    serialized: `{"event":${JSON.stringify(delivery.event)},"deliveryId":${JSON.stringify(delivery.deliveryId)},"hookId":${JSON.stringify(delivery.hookId ?? null)},"body":${delivery.json}}`,
    parsed: delivery.body && { event: delivery.event, deliveryId: delivery.deliveryId, hookId: delivery.hookId ?? null, body: delivery.body },
  };
}

const CLAIM_DELIVERY = 'INSERT INTO webhook_deliveries (hook_id, delivery_id, event, received_at, job_id) VALUES (?, ?, ?, ?, ?) ON CONFLICT (hook_id, delivery_id) DO NOTHING';
const DELIVERY_JOB = 'SELECT job_id FROM webhook_deliveries WHERE hook_id = ? AND delivery_id = ?';

/** A delivery's key, as one string. */
const deliveryKey = (hookId: string, deliveryId: string): string => `${hookId}\u0000${deliveryId}`;

type DeliveryRow = { hook_id: string; delivery_id: string; job_id: string };

/**
 * Claims the keys of a group of deliveries: each delivery's job id, the one
 * of the first delivery of its key. Without a hook id the key is the delivery
 * id alone: stored as "", since SQL NULLs never collide. Of two daemons
 * taking the same delivery at once (a shared store), the second waits for the
 * first's commit and then inserts nothing. Where parameters may be arrays
 * (PostgreSQL), two statements
 * whatever the group's size, its rows in the order of their keys: two daemons
 * writing overlapping groups then take the keys' locks in one order, and
 * never deadlock.
 */
async function claimKeys(tx: Tx, deliveries: DeliveryInput[], ids: string[]): Promise<string[]> {
  const hooks = deliveries.map((delivery) => delivery.hookId ?? '');
  const now = Date.now();
  if (!tx.dialect.arrays) {
    const jobs: string[] = [];
    for (const [index, delivery] of deliveries.entries()) {
      const { changes } = await tx.run(CLAIM_DELIVERY, hooks[index]!, delivery.deliveryId, delivery.event, now, ids[index]!);
      jobs.push(changes === 1 ? ids[index]! : (await tx.get<{ job_id: string }>(DELIVERY_JOB, hooks[index]!, delivery.deliveryId))!.job_id);
    }
    return jobs;
  }
  const keys = deliveries.map((delivery, index) => deliveryKey(hooks[index]!, delivery.deliveryId));
  const order = keys.map((_, index) => index).sort((a, b) => (keys[a]! < keys[b]! ? -1 : keys[a]! > keys[b]! ? 1 : 0));
  const claimed = await tx.all<DeliveryRow>(PG_CLAIM_DELIVERIES, order.map((index) => hooks[index]!), order.map((index) => deliveries[index]!.deliveryId),
    order.map((index) => deliveries[index]!.event), order.map(() => now), order.map((index) => ids[index]!));
  const jobOf = new Map(claimed.map((row) => [deliveryKey(row.hook_id, row.delivery_id), row.job_id]));
  const missing = order.filter((index) => !jobOf.has(keys[index]!));
  if (missing.length > 0) {
    const found = await tx.all<DeliveryRow>(PG_DELIVERY_JOBS, missing.map((index) => hooks[index]!), missing.map((index) => deliveries[index]!.deliveryId));
    for (const row of found) jobOf.set(deliveryKey(row.hook_id, row.delivery_id), row.job_id);
  }
  return keys.map((key) => jobOf.get(key)!);
}

/**
 * Records a group of deliveries and their jobs in one transaction (no
 * savepoint per delivery: a failure fails the group anyway), committed when
 * this resolves; a redelivery (same hook id and delivery id) creates nothing
 * and answers with the first one's job. With `runAtOnce`, the new jobs whose
 * handlers only touch the store make their first attempt in the same
 * transaction, and commit with their deliveries: no claim, no second commit.
 */
/**
 * Another module's interest in deliveries (automations with a webhook
 * trigger): told of each new delivery in the transaction that records it, so
 * what it queues commits with the delivery or not at all.
 */
export interface DeliveryFollower {
  /** Whether deliveries of an event may interest it now. */
  wants(event: string): boolean;
  /** Called with the group's new deliveries (never a redelivery), in their transaction. */
  follow(deliveries: { event: string; deliveryId: string; hookId: string | null; body: Record<string, unknown> }[], tx: Tx): Promise<void>;
}

export async function recordDeliveries(store: Store, queue: JobQueue, deliveries: DeliveryInput[], runAtOnce?: RunAtOnce, followers: readonly DeliveryFollower[] = []): Promise<Accepted[]> {
  const record = (atOnce: RunAtOnce | undefined) => store.transaction(async (tx) => {
    const ids = deliveries.map(() => queue.newId());
    const jobIds = await claimKeys(tx, deliveries, ids);
    const fresh = deliveries.flatMap((delivery, index) => (jobIds[index] === ids[index]
      ? [{ id: ids[index]!, kind: `github.${delivery.event}`, source: delivery.deliveryId, ...jobPayload(delivery) }] : []));
    const ran = atOnce ? await atOnce(fresh.flatMap((job) => (job.parsed ? [{ id: job.id, kind: job.kind, payload: job.parsed }] : [])), tx) : undefined;
    queue.queueMany(fresh.map((job) => ({ ...job, ran: ran?.get(job.id) })), tx);
    for (const follower of followers) {
      const wanted = deliveries.filter((delivery, index) => jobIds[index] === ids[index] && delivery.body && follower.wants(delivery.event));
      if (wanted.length) await follower.follow(wanted.map((delivery) => ({ event: delivery.event, deliveryId: delivery.deliveryId, hookId: delivery.hookId ?? null, body: delivery.body! })), tx);
    }
    return deliveries.map((delivery, index) => ({ deliveryId: delivery.deliveryId, jobId: jobIds[index]!, duplicate: jobIds[index] !== ids[index] }));
  });
  if (!runAtOnce) return record(undefined);
  try {
    return await record(runAtOnce);
  } catch (error) {
    // A handler that failed at once (on PostgreSQL it fails its group) leaves its job to be queued and run in its turn:
    // the group is recorded again without running anything. A storage that fails, fails the group.
    if (store.health.failed(error)) throw error;
    return record(undefined);
  }
}

/**
 * Parses and checks a group of deliveries and records those that pass, in
 * one transaction: a delivery whose payload is refused changes nothing of the
 * others. Each parsed payload is kept for the job worker of the same thread,
 * which then need not parse it again.
 */
export async function acceptDeliveries(store: Store, queue: JobQueue, raws: RawDelivery[], runAtOnce?: RunAtOnce, followers?: readonly DeliveryFollower[]): Promise<Outcome[]> {
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
  if (good.length > 0) (await recordDeliveries(store, queue, good, runAtOnce, followers)).forEach((accepted, index) => { outcomes[places[index]!] = accepted; });
  return outcomes;
}

/** Deletes the records of deliveries older than the retention (their jobs go with the jobs' own); says how many. */
export async function pruneDeliveries(store: Store, retentionMs: number): Promise<number> {
  return pruneRows(store, 'webhook_deliveries', 'hook_id, delivery_id', 'received_at < ?', Date.now() - retentionMs);
}

interface Pending {
  delivery: RawDelivery;
  resolve: (accepted: Accepted) => void;
  reject: (error: unknown) => void;
}

/** What parses, checks and writes a group of deliveries: in the daemon's thread or in another. */
export type AcceptGroup = (deliveries: RawDelivery[]) => Promise<Outcome[]>;

/**
 * Group commit: deliveries that arrive together are written in one
 * transaction, and each is answered only after that transaction commits. The
 * commit is the costly part of a delivery (a round trip to a shared
 * database); sharing it among concurrent ones keeps every answer durable at a
 * fraction of the cost. A failed commit fails the whole group and leaves
 * nothing of it behind.
 *
 * With `maxGroup` (when another thread writes), a group leaves as soon as it
 * is that large: that thread starts on the first deliveries of a burst while
 * this one still reads the rest, instead of each waiting for the other. With
 * `maxInFlight`, at most that many groups are being written at once; what
 * arrives meanwhile waits and leaves as one group when one of them is done.
 */
export class DeliveryIntake {
  private pending: Pending[] = [];
  private inFlight = 0;
  private flushing = false;
  private readonly acceptGroup: AcceptGroup;
  private readonly maxGroup: number;
  private readonly maxInFlight: number;

  constructor(acceptGroup: AcceptGroup, options: { maxGroup?: number; maxInFlight?: number } = {}) {
    this.acceptGroup = acceptGroup;
    this.maxGroup = options.maxGroup ?? Infinity;
    this.maxInFlight = options.maxInFlight ?? Infinity;
  }

  /** Resolves once the delivery is committed with its job; rejects with a 400 for a payload it refuses. */
  accept(delivery: RawDelivery): Promise<Accepted> {
    return new Promise((resolve, reject) => {
      const size = this.pending.push({ delivery, resolve, reject });
      if (size >= this.maxGroup) this.flush();
      else if (!this.flushing) {
        this.flushing = true;
        setImmediate(() => {
          this.flushing = false;
          this.flush();
        });
      }
    });
  }

  private flush(): void {
    // A group that left when it was full leaves nothing for its turn; a full house of groups makes this one wait.
    if (this.pending.length === 0 || this.inFlight >= this.maxInFlight) return;
    const group = this.pending;
    this.pending = [];
    this.inFlight++;
    this.acceptGroup(group.map(({ delivery }) => delivery)).then(
      (outcomes) => group.forEach(({ resolve, reject }, index) => {
        const outcome = outcomes[index]!;
        if ('refused' in outcome) reject(invalid(outcome.refused));
        else resolve(outcome);
      }),
      (error: unknown) => {
        for (const { reject } of group) reject(error);
      },
    ).finally(() => {
      this.inFlight--;
      this.flush();
    });
  }
}
