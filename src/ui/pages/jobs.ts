/** Jobs: a filtered list, one job's detail, retry; new webhook deliveries appear as they come (the jobs.changed event). */
import { html, nothing } from 'lit';
import { Page, when } from '../page.ts';
import type { Job, JobList } from '../../shared/protocol/results.ts';

const STATUSES = ['queued', 'running', 'succeeded', 'failed'];

export class JobsPage extends Page {
  static override properties = { jobs: { state: true }, selected: { state: true }, status: { state: true }, kind: { state: true }, cursor: { state: true } };
  declare jobs: Job[] | undefined;
  declare selected: Job | undefined;
  declare status: string;
  declare kind: string;
  declare cursor: string | null;

  constructor() {
    super();
    this.status = '';
    this.kind = '';
    this.cursor = null;
  }

  protected async load(): Promise<void> {
    this.listen('jobs.changed', () => void this.guard(() => this.refresh()));
    await this.refresh();
  }

  private filter(): Record<string, unknown> {
    return { ...(this.status ? { status: this.status } : {}), ...(this.kind ? { kind: this.kind } : {}), limit: 50 };
  }

  private async refresh(): Promise<void> {
    const page = await this.call<JobList>('jobs.list', this.filter());
    this.jobs = page.jobs;
    this.cursor = page.nextCursor;
    if (this.selected) this.selected = await this.call<Job>('jobs.get', { id: this.selected.id }).catch(() => this.selected);
  }

  private async more(): Promise<void> {
    if (!this.cursor) return;
    const page = await this.call<JobList>('jobs.list', { ...this.filter(), cursor: this.cursor });
    this.jobs = [...(this.jobs ?? []), ...page.jobs];
    this.cursor = page.nextCursor;
  }

  private async retry(job: Job): Promise<void> {
    await this.guard(async () => {
      this.selected = await this.call<Job>('jobs.retry', { id: job.id });
      this.notice = `Job ${job.id} is queued again.`;
      await this.refresh();
    });
  }

  protected override render() {
    return html`${this.alerts()}
      <form class="filters" role="search" @submit=${(e: Event) => { e.preventDefault(); void this.guard(() => this.refresh()); }}>
        <label for="job-status">Status</label>
        <select id="job-status" @change=${(e: Event) => { this.status = (e.target as HTMLSelectElement).value; void this.guard(() => this.refresh()); }}>
          <option value="">any</option>${STATUSES.map((s) => html`<option value=${s} ?selected=${s === this.status}>${s}</option>`)}
        </select>
        <label for="job-kind">Kind</label>
        <input id="job-kind" .value=${this.kind} @change=${(e: Event) => { this.kind = (e.target as HTMLInputElement).value.trim(); void this.guard(() => this.refresh()); }} placeholder="e.g. github.push">
      </form>
      ${this.selected ? this.detail(this.selected) : nothing}
      <section class="card" aria-labelledby="jobs-title">
        <h2 id="jobs-title">Jobs</h2>
        ${!this.jobs ? html`<p class="muted">Loading…</p>` : this.jobs.length === 0 ? html`<p class="muted">No jobs match.</p>` : html`
        <div class="scroll"><table data-testid="jobs">
          <thead><tr><th scope="col">Job</th><th scope="col">Kind</th><th scope="col">Status</th><th scope="col">Attempts</th><th scope="col">Created</th></tr></thead>
          <tbody>${this.jobs.map((job) => html`<tr>
            <td><button class="link" @click=${() => { this.selected = job; }}>${job.id}</button></td><td>${job.kind}</td>
            <td><span class="badge ${job.status === 'succeeded' ? 'ok' : job.status === 'failed' ? 'bad' : 'warn'}">${job.status}</span></td>
            <td>${job.attempts}/${job.maxAttempts}</td><td>${when(job.createdAt)}</td></tr>`)}</tbody></table></div>
        ${this.cursor ? html`<button class="secondary" @click=${() => void this.guard(() => this.more())}>More</button>` : nothing}`}
      </section>`;
  }

  private detail(job: Job) {
    return html`<section class="card" aria-labelledby="job-title">
      <h2 id="job-title">Job ${job.id}</h2>
      <dl class="facts">
        <dt>Kind</dt><dd>${job.kind}</dd><dt>Status</dt><dd>${job.status}</dd><dt>Attempts</dt><dd>${job.attempts} of ${job.maxAttempts}</dd>
        <dt>Source</dt><dd>${job.source ?? '—'}</dd><dt>Created</dt><dd>${when(job.createdAt)}</dd><dt>Started</dt><dd>${when(job.startedAt)}</dd>
        <dt>Finished</dt><dd>${when(job.finishedAt)}</dd>${job.error ? html`<dt>Error</dt><dd class="error-text">${job.error}</dd>` : nothing}
      </dl>
      ${job.result !== null && job.result !== undefined ? html`<h3>Result</h3><pre>${JSON.stringify(job.result, null, 2)}</pre>` : nothing}
      <div class="row">
        ${job.status === 'failed' && this.gateway.has('operator.write') ? html`<button @click=${() => void this.retry(job)}>Retry</button>` : nothing}
        <button class="secondary" @click=${() => { this.selected = undefined; }}>Close</button>
      </div>
    </section>`;
  }
}
customElements.define('gw-jobs', JobsPage);
