/**
 * What fires an automation besides the clock: a GitHub delivery its webhook
 * trigger matches (in the transaction that records the delivery), a request
 * to the hook its trigger names (a repeated Idempotency-Key fires it once),
 * and an operator's `gateway automations run`.
 */
import { randomUUID } from 'node:crypto';
import { isScheduled } from '../../shared/automations.ts';
import type { AutomationSettings, GatewayConfig } from '../../shared/config/types.ts';
import { DomainError } from '../kernel/errors.ts';
import type { DeliveryFollower } from '../webhooks/module.ts';
import type { HookFollower } from '../hooks/module.ts';
import type { Store } from '../store/database.ts';
import type { FiringMaker, NewFiring } from './firing-maker.ts';

export const iso = (ms: number | null | undefined) => (ms === null || ms === undefined ? null : new Date(Number(ms)).toISOString());
/** A trigger's spec: a cursor and a schedule belong to one spec, and a changed trigger starts afresh. */
export const specOf = (settings: AutomationSettings) => JSON.stringify(settings.trigger);
export const scheduled = (settings: AutomationSettings) => settings.enabled && isScheduled(settings.trigger);

type Delivery = Parameters<DeliveryFollower['follow']>[0][number];

/** Whether a GitHub delivery fires an automation: its event, and the action, repository (any case) and ref its trigger names. */
export function matchesDelivery(settings: AutomationSettings, event: string, body: Record<string, any>): boolean {
  const want = settings.trigger.webhook;
  if (!settings.enabled || !want || want.event !== event) return false;
  if (want.action !== undefined && body.action !== want.action) return false;
  if (want.repository !== undefined && String(body.repository?.full_name ?? '').toLowerCase() !== want.repository.toLowerCase()) return false;
  return want.ref === undefined || body.ref === want.ref;
}

/** The firings a group of deliveries makes: one per delivery and automation it matches, keyed by the delivery. */
export function deliveryFirings(automations: Record<string, AutomationSettings>, deliveries: readonly Delivery[], now: number): NewFiring[] {
  return deliveries.flatMap((delivery) => Object.entries(automations)
    .filter(([, settings]) => matchesDelivery(settings, delivery.event, delivery.body))
    .map(([id]) => ({
      automation: id, key: `delivery-${delivery.hookId ?? ''}-${delivery.deliveryId}`, scheduledFor: now, firedBy: 'webhook' as const,
      fields: {
        event: delivery.event, delivery: delivery.deliveryId, action: delivery.body.action ?? null, repository: (delivery.body.repository as any)?.full_name ?? null,
        ref: delivery.body.ref ?? null, sender: (delivery.body.sender as any)?.login ?? null, payload: delivery.body,
      },
    })));
}

/** The firings a request to a hook makes: one per enabled automation naming it, all under the request's key. */
export function hookFirings(automations: Record<string, AutomationSettings>, name: string, payload: Record<string, unknown>, key: string, now: number): NewFiring[] {
  return Object.entries(automations).filter(([, settings]) => settings.enabled && settings.trigger.hook === name)
    .map(([id]) => ({ automation: id, key, scheduledFor: now, firedBy: 'hook' as const, fields: { hook: name, payload } }));
}

export interface TriggersDeps {
  config: () => GatewayConfig;
  store: Store;
  maker: FiringMaker;
  now?: () => number;
}

export class Triggers {
  private readonly deps: TriggersDeps;
  private readonly now: () => number;
  /** What the enabled event triggers listen for, worked out once per configuration: asked of every delivery and hook request. */
  private listening: { config: GatewayConfig; events: Set<string>; hooks: Set<string> } | undefined;

  constructor(deps: TriggersDeps) {
    this.deps = deps;
    this.now = deps.now ?? Date.now;
  }

  /** The GitHub events and the hooks some enabled automation's trigger names. */
  listens(): { events: ReadonlySet<string>; hooks: ReadonlySet<string> } {
    const config = this.deps.config();
    if (this.listening?.config !== config) {
      const enabled = Object.values(config.automations).filter((settings) => settings.enabled);
      this.listening = {
        config, events: new Set(enabled.flatMap((settings) => (settings.trigger.webhook ? [settings.trigger.webhook.event] : []))),
        hooks: new Set(enabled.flatMap((settings) => (settings.trigger.hook ? [settings.trigger.hook] : []))),
      };
    }
    return this.listening;
  }

  /** Follows GitHub deliveries: those that match a webhook trigger fire it, in the transaction that records them. */
  deliveryFollower(): DeliveryFollower {
    return {
      wants: (event) => this.listens().events.has(event),
      follow: async (deliveries, tx) => {
        const list = deliveryFirings(this.deps.config().automations, deliveries, this.now());
        if (list.length) await this.deps.maker.make(tx, list);
      },
    };
  }

  /** Follows hook requests: a request to a hook a trigger names fires it; a repeated Idempotency-Key fires it once. */
  hookFollower(): HookFollower {
    return {
      wants: (name) => this.listens().hooks.has(name),
      fire: async (name, payload, key) => {
        const list = hookFirings(this.deps.config().automations, name, payload, `hook-${key ?? randomUUID()}`, this.now());
        const made = await this.deps.store.transaction((tx) => this.deps.maker.make(tx, list));
        return made.map((firing) => ({ action: 'automation', automation: firing.automation, jobId: firing.jobId }));
      },
    };
  }

  /** Fires an automation now, as an operator asked. */
  async manual(id: string, settings: AutomationSettings): Promise<{ automation: string; key: string; jobId: string }> {
    if (!settings.enabled) throw new DomainError('conflict', `Automation ${id} is disabled: gateway automations enable ${id}`);
    const key = `manual-${this.now()}-${randomUUID().slice(0, 8)}`;
    const now = this.now();
    const [made] = await this.deps.store.transaction((tx) => this.deps.maker.make(tx, [{ automation: id, key, scheduledFor: now, firedBy: 'manual' }]));
    return { automation: id, key, jobId: made!.jobId };
  }
}
