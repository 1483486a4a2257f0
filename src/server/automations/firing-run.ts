/**
 * A firing's job: what an automation does when it fires. A message is
 * rendered from the trigger's fields and goes to the channel's outbox; an
 * agent's run answers the rendered prompt, and its answer goes where the
 * automation delivers it. The answer is recorded with the delivery, in its
 * transaction, so a retried job after a crash delivers once.
 */
import type { AutomationSettings } from '../../shared/config/types.ts';
import type { Agents } from '../agents/module.ts';
import type { ChannelManager } from '../channels/module.ts';
import { renderTemplate } from '../hooks/module.ts';
import { DomainError } from '../kernel/errors.ts';
import { automationPerson } from '../kernel/person.ts';
import type { Sessions } from '../sessions/module.ts';
import type { Store } from '../store/database.ts';
import type { FiringPayload } from './firing-maker.ts';
import type { FiringRow, Firings } from './firings.ts';
import { iso } from './triggers.ts';

/** Where an answer goes, as the channel's outbox takes it. */
export interface Destination {
  channel: string;
  account: string;
  to: string;
  sessionKey?: string;
}

export interface FiringRunDeps {
  automations: () => Record<string, AutomationSettings>;
  store: Store;
  firings: Firings;
  reply: ChannelManager['reply'];
  sessions: Pick<Sessions['store'], 'get'>;
  run: Agents['run'];
  emit: (event: string, payload: unknown) => void;
}

/** What a firing's run answered, as its job's result. */
export const resultOf = (row: FiringRow) => ({ runId: row.run_id, text: row.answer, usage: row.usage ? JSON.parse(row.usage) : null, deliveredTo: row.delivered_to });

export class FiringRun {
  private readonly deps: FiringRunDeps;

  constructor(deps: FiringRunDeps) {
    this.deps = deps;
  }

  /** Where an automation's answer goes: the channel its action names, or the session it continues when it delivers there. */
  async destination(settings: AutomationSettings, sessionKey: string | undefined): Promise<Destination | undefined> {
    const { deliver, message } = settings.action;
    const target = message ?? (typeof deliver === 'object' ? deliver : undefined);
    if (target) return { channel: target.channel, account: target.account ?? 'default', to: target.to };
    if (deliver !== 'session' || !sessionKey) return undefined;
    const session = await this.deps.sessions.get(sessionKey);
    if (!session) throw new DomainError('not_found', `No session ${sessionKey} to deliver to.`);
    return { channel: session.channel, account: session.account, to: session.peer, sessionKey };
  }

  /** Runs a firing's job (its attempt counts from 1). */
  async handle(raw: unknown, { attempt }: { attempt: number }): Promise<Record<string, unknown>> {
    const { store, firings } = this.deps;
    const firing = raw as FiringPayload;
    const automations = this.deps.automations();
    const settings = Object.hasOwn(automations, firing.automation) ? automations[firing.automation] : undefined;
    // Changed since it fired: a removed or disabled automation does nothing, and says so in its runs.
    if (!settings || !settings.enabled) {
      const why = settings ? 'the automation was disabled before it ran' : 'the automation was removed before it ran';
      await firings.skip(firing.automation, firing.key, why);
      return { skipped: why };
    }
    await firings.started(firing.automation, firing.key, Date.now());
    // An earlier attempt ran and delivered, then lost its daemon before it could say so: that answer stands.
    const earlier = attempt > 1 ? await firings.get(firing.automation, firing.key) : undefined;
    if (earlier?.answer !== null && earlier?.answer !== undefined) return resultOf(earlier);
    this.deps.emit('automations.fired', { automation: firing.automation, key: firing.key, scheduledFor: iso(firing.scheduledFor) });
    const outboxKey = `automation:${firing.automation}:${firing.key}`;
    if (settings.action.message) {
      const text = renderTemplate(settings.action.message.text, firing.fields);
      if (!text.trim()) throw new DomainError('invalid', `The message of automation ${firing.automation} is empty once filled from its trigger.`);
      const to = (await this.destination(settings, undefined))!;
      await store.transaction(async (tx) => {
        await this.deps.reply({ ...to, text, key: outboxKey }, tx);
        await firings.finished(tx, firing.automation, firing.key, { runId: null, text, usage: null, deliveredTo: `${to.channel}:${to.account}:${to.to}` });
      });
      return { text, deliveredTo: `${to.channel}:${to.account}:${to.to}` };
    }
    const { action } = settings;
    const sessionKey = action.session && action.session !== 'isolated' ? action.session : undefined;
    const prompt = renderTemplate(action.prompt ?? '', firing.fields);
    if (!prompt.trim()) throw new DomainError('invalid', `The prompt of automation ${firing.automation} is empty once filled from its trigger.`);
    const existing = sessionKey ? await this.deps.sessions.get(sessionKey) : undefined;
    if (sessionKey && !existing) throw new DomainError('not_found', `Automation ${firing.automation} continues session ${sessionKey}, which does not exist (gateway sessions list).`);
    const to = await this.destination(settings, sessionKey);
    const outcome = await this.deps.run({
      agentId: action.agent, text: prompt, surface: 'automation', subject: `automation:${firing.automation}`,
      // The automation acts for itself; its prompt is its own words only in a session of its own, not in one it continues.
      person: automationPerson(firing.automation),
      sender: { id: `automation:${firing.automation}`, name: firing.automation, ...(sessionKey ? {} : { person: automationPerson(firing.automation) }) },
      session: sessionKey ? { key: sessionKey } : { channel: 'automation', account: firing.automation, kind: 'direct', peer: firing.key },
    });
    if (outcome.status !== 'succeeded') throw new DomainError('unavailable', `The run ${outcome.runId} ended ${outcome.status}${outcome.error ? `: ${outcome.error}` : ''}.`);
    const usage = outcome.usage as Record<string, number>;
    const deliveredTo = to && outcome.text.trim() ? `${to.channel}:${to.account}:${to.to}` : null;
    await store.transaction(async (tx) => {
      if (to && deliveredTo) await this.deps.reply({ ...to, text: outcome.text, key: outboxKey, runId: outcome.runId, ...(to.sessionKey ? { sessionKey: to.sessionKey } : {}) }, tx);
      await firings.finished(tx, firing.automation, firing.key, { runId: outcome.runId, text: outcome.text, usage, deliveredTo });
    });
    return { runId: outcome.runId, text: outcome.text, usage, deliveredTo };
  }
}
