/**
 * Automations as operators see them (`gateway automations list|get|runs`):
 * each with its trigger described, when it fires next and how its last
 * firing went; a firing with its job's state.
 */
import { describeTrigger } from '../../shared/automations.ts';
import type { AutomationSettings } from '../../shared/config/types.ts';
import type { AutomationRun, AutomationView, JobStatus } from '../../shared/protocol/results.ts';
import type { JobQueue } from '../jobs/module.ts';
import { DomainError } from '../kernel/errors.ts';
import type { FiringRow, Firings } from './firings.ts';
import { iso, scheduled } from './triggers.ts';

export interface ViewsDeps {
  automations: () => Record<string, AutomationSettings>;
  firings: Firings;
  jobs: Pick<JobQueue, 'get'>;
  /** When a scheduled automation fires next. */
  nextOf: (id: string) => number | undefined;
}

/** A view for a list: a long prompt or message cut, so a page of them stays one frame. */
export function brief(automation: AutomationView): AutomationView {
  const cut = (text: unknown) => (typeof text === 'string' && text.length > 200 ? `${text.slice(0, 199)}…` : text);
  const { prompt, message } = automation.action as { prompt?: string; message?: { text: string } };
  return { ...automation, action: { ...automation.action, ...(prompt ? { prompt: cut(prompt) } : {}), ...(message ? { message: { ...message, text: cut(message.text) } } : {}) } };
}

export class AutomationViews {
  private readonly deps: ViewsDeps;

  constructor(deps: ViewsDeps) {
    this.deps = deps;
  }

  /** An automation's settings, or not_found naming those there are. */
  existing(id: string): AutomationSettings {
    const automations = this.deps.automations();
    const settings = Object.hasOwn(automations, id) ? automations[id] : undefined;
    if (!settings) throw new DomainError('not_found', `No automation ${id} (automations: ${Object.keys(automations).join(', ') || 'none'}).`, { code: 'automation_not_found' });
    return settings;
  }

  /** A page of automations by id, each cut short. */
  async list({ limit = 200, cursor }: { limit?: number; cursor?: string }): Promise<{ automations: AutomationView[]; nextCursor: string | null }> {
    const automations = this.deps.automations();
    const ids = Object.keys(automations).sort().filter((id) => cursor === undefined || id > cursor);
    const page = ids.slice(0, limit);
    const latest = await this.deps.firings.latest(page);
    const views = await Promise.all(page.map((id) => this.view(id, automations[id]!, latest.get(id))));
    return { automations: views.map(brief), nextCursor: ids.length > limit ? page.at(-1)! : null };
  }

  async get(id: string): Promise<AutomationView> {
    return this.view(id, this.existing(id), (await this.deps.firings.recent(id, 1))[0]);
  }

  /** An automation's latest firings, newest first. */
  async runs(id: string, limit = 20): Promise<{ automation: string; runs: AutomationRun[] }> {
    this.existing(id);
    return { automation: id, runs: await Promise.all((await this.deps.firings.recent(id, limit)).map((row) => this.runView(row))) };
  }

  async runView(row: FiringRow): Promise<AutomationRun> {
    const job = await this.deps.jobs.get(row.job_id);
    return {
      key: row.firing_key, firedBy: row.fired_by as AutomationRun['firedBy'], jobId: row.job_id, state: (job?.status ?? 'succeeded') as JobStatus, attempts: job?.attempts ?? 0,
      scheduledFor: iso(row.scheduled_for)!, firedAt: iso(row.fired_at), runId: row.run_id, text: row.answer,
      usage: row.usage ? JSON.parse(row.usage) : null, deliveredTo: row.delivered_to, error: job?.status === 'succeeded' ? null : (job?.error ?? null), skipped: row.skipped,
    };
  }

  private async view(id: string, settings: AutomationSettings, last: FiringRow | undefined): Promise<AutomationView> {
    return {
      id, description: settings.description ?? null, enabled: settings.enabled, trigger: { ...settings.trigger }, when: describeTrigger(settings.trigger),
      action: { ...settings.action }, catchUp: settings.catchUp, nextAt: iso(scheduled(settings) ? this.deps.nextOf(id) : undefined),
      last: last ? await this.runView(last) : null,
    };
  }
}
