/** Automations: each with its trigger, next firing and last result; run one now; one automation's firings. */
import { html, nothing } from 'lit';
import { Page, when } from '../page.ts';
import type { AutomationRun, AutomationView } from '../../shared/protocol/results.ts';

const badge = (state: string) => html`<span class="badge ${state === 'succeeded' ? 'ok' : state === 'failed' ? 'bad' : 'warn'}">${state}</span>`;
const actionOf = (automation: AutomationView) => (typeof automation.action.agent === 'string'
  ? `agent ${automation.action.agent}` : `message to ${(automation.action.message as { channel: string; to: string }).channel}:${(automation.action.message as { to: string }).to}`);

export class AutomationsPage extends Page {
  static override properties = { automations: { state: true }, selected: { state: true }, runs: { state: true }, cursor: { state: true } };
  declare automations: AutomationView[] | undefined;
  declare cursor: string | null;
  declare selected: string | undefined;
  declare runs: AutomationRun[] | undefined;

  protected async load(): Promise<void> {
    // A firing's job changing state (queued, running, done) shows at once.
    this.listen('jobs.changed', () => void this.guard(() => this.refresh()));
    await this.refresh();
  }

  private async refresh(): Promise<void> {
    const page = await this.call<{ automations: AutomationView[]; nextCursor: string | null }>('automations.list', { limit: Math.min(500, Math.max(100, this.automations?.length ?? 0)) });
    this.automations = page.automations;
    this.cursor = page.nextCursor;
    if (this.selected) await this.open(this.selected);
  }

  private async more(): Promise<void> {
    if (!this.cursor) return;
    const page = await this.call<{ automations: AutomationView[]; nextCursor: string | null }>('automations.list', { limit: 100, cursor: this.cursor });
    this.automations = [...(this.automations ?? []), ...page.automations];
    this.cursor = page.nextCursor;
  }

  private async open(id: string): Promise<void> {
    this.selected = id;
    this.runs = (await this.call<{ runs: AutomationRun[] }>('automations.runs', { id, limit: 20 })).runs;
  }

  private async fire(automation: AutomationView): Promise<void> {
    await this.guard(async () => {
      const fired = await this.call<{ jobId: string }>('automations.run', { id: automation.id });
      this.notice = `Automation ${automation.id} fired (job ${fired.jobId}).`;
      await this.open(automation.id);
      await this.refresh();
    });
  }

  protected override render() {
    const writable = this.gateway.has('operator.write');
    return html`${this.alerts()}
      <section class="card" aria-labelledby="automations-title">
        <h2 id="automations-title">Automations</h2>
        ${!this.automations ? html`<p class="muted">Loading…</p>` : this.automations.length === 0
          ? html`<p class="muted">No automations yet. Add one from a terminal: <code>gateway automations add daily --cron "0 9 * * 1-5" --agent main --prompt "…"</code></p>`
          : html`<div class="scroll"><table data-testid="automations">
          <thead><tr><th scope="col">Automation</th><th scope="col">Trigger</th><th scope="col">Action</th><th scope="col">Next firing</th><th scope="col">Last result</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
          <tbody>${this.automations.map((automation) => html`<tr>
            <td><button class="link" @click=${() => void this.guard(() => this.open(automation.id))}>${automation.id}</button>${automation.enabled ? nothing : html` <span class="badge">disabled</span>`}
              ${automation.description ? html`<div class="muted">${automation.description}</div>` : nothing}</td>
            <td>${automation.when}</td><td>${actionOf(automation)}</td>
            <td>${automation.nextAt ? when(automation.nextAt) : '—'}</td>
            <td>${automation.last ? html`${badge(automation.last.state)} <span class="muted">${when(automation.last.scheduledFor)}</span>` : '—'}</td>
            <td>${writable && automation.enabled ? html`<button class="secondary" aria-label=${`Run ${automation.id} now`} @click=${() => void this.fire(automation)}>Run now</button>` : nothing}</td>
          </tr>`)}</tbody></table></div>
        ${this.cursor ? html`<button class="secondary" @click=${() => void this.guard(() => this.more())}>More</button>` : nothing}`}
      </section>
      ${this.selected && this.runs ? this.detail(this.selected, this.runs) : nothing}`;
  }

  private detail(id: string, runs: AutomationRun[]) {
    return html`<section class="card" aria-labelledby="automation-runs-title">
      <h2 id="automation-runs-title">Runs of ${id}</h2>
      ${runs.length === 0 ? html`<p class="muted">It has not fired yet.</p>` : html`<div class="scroll"><table data-testid="automation-runs">
        <thead><tr><th scope="col">Scheduled</th><th scope="col">Fired by</th><th scope="col">State</th><th scope="col">Answer</th><th scope="col">Delivered to</th></tr></thead>
        <tbody>${runs.map((run) => html`<tr>
          <td>${when(run.scheduledFor)}</td><td>${run.firedBy}</td><td>${badge(run.state)}${run.attempts > 1 ? html` <span class="muted">attempt ${run.attempts}</span>` : nothing}</td>
          <td>${run.skipped ?? (run.error ? html`<span class="error-text">${run.error}</span>` : run.text ?? '—')}</td><td>${run.deliveredTo ?? '—'}</td>
        </tr>`)}</tbody></table></div>`}
      <div class="row"><button class="secondary" @click=${() => { this.selected = undefined; this.runs = undefined; }}>Close</button></div>
    </section>`;
  }
}
customElements.define('gw-automations', AutomationsPage);
