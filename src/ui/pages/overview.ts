/**
 * Overview: the daemon's state, exposure and readiness, its channels, commands
 * waiting for approval before exec runs them, and recent errors from its log;
 * live over events.
 */
import { html, nothing } from 'lit';
import { duration, LEVEL_NAMES, Page, when } from '../page.ts';
import type { ChannelStatus, ExecApprovalView, LogEntry, MetricsSummary, StatusPayload, UsageSummary } from '../../shared/protocol/results.ts';
import { visibleText } from '../../shared/visible-text.ts';

export class OverviewPage extends Page {
  static override properties = { status: { state: true }, channels: { state: true }, errors: { state: true }, now: { state: true }, approvals: { state: true }, figures: { state: true }, spend: { state: true } };
  declare spend: { today: UsageSummary; month: UsageSummary } | undefined;
  declare approvals: ExecApprovalView[];
  declare figures: MetricsSummary | undefined;
  declare status: StatusPayload | undefined;
  declare channels: ChannelStatus[];
  declare errors: LogEntry[] | undefined;
  declare now: number;
  private clock: number | undefined;

  constructor() {
    super();
    this.channels = [];
    this.approvals = [];
    this.now = Date.now();
  }

  protected async load(): Promise<void> {
    this.listen('channel.status', (payload) => {
      const changed = payload as ChannelStatus;
      this.channels = [...this.channels.filter((c) => !(c.channel === changed.channel && c.account === changed.account)), changed]
        .sort((a, b) => `${a.channel}/${a.account}`.localeCompare(`${b.channel}/${b.account}`));
    });
    this.listen('tick', () => {
      void this.refreshStatus();
      void this.refreshFigures();
    });
    this.listen('log.entries', (payload) => {
      const entries = (payload as { entries: LogEntry[] }).entries.filter((entry) => entry.level >= 50);
      if (entries.length) this.errors = [...(this.errors ?? []), ...entries].slice(-10);
    });
    this.listen('exec.approval', (payload) => {
      const { event, approval } = payload as { event: 'requested' | 'resolved'; approval: ExecApprovalView };
      this.approvals = event === 'requested' ? [...this.approvals.filter((a) => a.id !== approval.id), approval] : this.approvals.filter((a) => a.id !== approval.id);
    });
    this.clock = window.setInterval(() => { this.now = Date.now(); }, 1000);
    const [status, channels, approvals] = await Promise.all([
      this.call<StatusPayload>('status'),
      this.call<{ channels: ChannelStatus[] }>('channels.status'),
      this.call<{ approvals: ExecApprovalView[] }>('approvals.list'),
    ]);
    this.status = status;
    this.channels = channels.channels;
    this.approvals = approvals.approvals;
    await this.refreshFigures();
    if (this.gateway.has('operator.admin')) {
      const tail = await this.call<{ entries: LogEntry[] }>('logs.tail', { level: 'error', lines: 10 });
      this.errors = tail.entries;
      await this.call('logs.follow', { level: 'error' });
    }
  }

  protected override leave(): void {
    clearInterval(this.clock);
    if (this.gateway.has('operator.admin')) this.gateway.request('logs.unfollow').catch(() => undefined);
  }

  private async decide(approval: ExecApprovalView, approve: boolean): Promise<void> {
    await this.guard(async () => {
      await this.call('approvals.decide', { id: approval.id, approve });
      this.approvals = this.approvals.filter((a) => a.id !== approval.id);
      this.notice = `${approve ? 'Approved' : 'Rejected'}: ${visibleText(approval.command)}`;
    });
  }

  private approvalsCard() {
    if (this.approvals.length === 0) return nothing;
    const admin = this.gateway.has('operator.admin');
    return html`<section class="card" aria-labelledby="approvals-title">
      <h2 id="approvals-title">Waiting for approval</h2>
      <ul class="plain" data-testid="approvals">${this.approvals.map((approval) => html`<li>
        <code class="wrap" data-testid="approval-command">${visibleText(approval.command)}</code>
        <div class="muted">${approval.code} · ${visibleText(approval.caller)}${approval.sessionKey ? html` in ${visibleText(approval.sessionKey)}` : nothing} · ${approval.why} · until ${when(approval.expiresAt)}</div>
        ${admin ? html`<div class="row">
          <button aria-label=${`Approve ${approval.id}`} @click=${() => void this.decide(approval, true)}>Approve</button>
          <button class="secondary" aria-label=${`Reject ${approval.id}`} @click=${() => void this.decide(approval, false)}>Reject</button></div>`
          : html`<p class="muted">Approving needs the admin scope.</p>`}
      </li>`)}</ul>
    </section>`;
  }

  private async refreshFigures(): Promise<void> {
    this.figures = await this.call<MetricsSummary>('metrics.summary').catch(() => this.figures);
    const now = new Date();
    const day = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate());
    const month = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1);
    const [today, thisMonth] = await Promise.all([
      this.call<UsageSummary>('usage.summary', { since: day }), this.call<UsageSummary>('usage.summary', { since: month }),
    ]).catch(() => [undefined, undefined] as const);
    if (today && thisMonth) this.spend = { today, month: thisMonth };
  }

  private spendCard() {
    const spend = this.spend;
    if (!spend) return nothing;
    const money = (amount: number) => `${amount.toFixed(amount > 0 && amount < 0.01 ? 4 : 2)} ${spend.month.currency}`;
    const top = spend.month.byAgent.filter((group) => group.cost > 0).slice(0, 5);
    return html`<section class="card" aria-labelledby="spend-title">
      <h2 id="spend-title">Spend</h2>
      <dl class="facts" data-testid="spend">
        <dt>Today (UTC)</dt><dd data-testid="spend-today">${money(spend.today.total.cost)}</dd>
        <dt>This month</dt><dd data-testid="spend-month">${money(spend.month.total.cost)}</dd>
        ${top.length ? html`<dt>By agent, this month</dt><dd>${top.map((group) => `${group.key} ${money(group.cost)}`).join(', ')}</dd>` : nothing}
      </dl>
      ${spend.month.total.unpriced ? html`<p class="muted">${spend.month.total.unpriced} calls this month were of models with no known price (models.providers.&lt;id&gt;.prices).</p>` : nothing}
    </section>`;
  }

  private figuresCard() {
    const summary = this.figures;
    if (!summary) return nothing;
    const f = summary.figures;
    const seconds = (value: number | null) => (value === null ? '—' : value < 0.01 ? `≤ ${Number((value * 1000).toFixed(2))} ms` : value < 1 ? `≤ ${Math.round(value * 1000)} ms` : `≤ ${value} s`);
    const count = (value: number) => Math.round(value).toLocaleString();
    return html`<section class="card" aria-labelledby="figures-title">
      <h2 id="figures-title">Figures</h2>
      ${!summary.enabled || !f ? html`<p class="muted">Metrics are off. <code>gateway config set metrics.enabled true</code> turns on GET /metrics and these figures.</p>` : html`
      <dl class="facts figures" data-testid="figures">
        <dt>HTTP requests</dt><dd>${count(f.http.requests)} (${count(f.http.serverErrors)} server errors), p50 ${seconds(f.http.p50Seconds)}, p99 ${seconds(f.http.p99Seconds)}</dd>
        <dt>Model calls</dt><dd>${count(f.inference.calls)} (${count(f.inference.failed)} failed), first token p50 ${seconds(f.inference.firstTokenP50Seconds)}, tokens ${count(f.inference.inputTokens)} in / ${count(f.inference.outputTokens)} out</dd>
        <dt>Jobs</dt><dd>${count(f.jobs.queued)} queued, ${count(f.jobs.running)} running, ${count(f.jobs.failed)} failed; oldest waiting ${Math.round(f.jobs.oldestQueuedAgeSeconds)} s</dd>
        <dt>Webhook deliveries</dt><dd>${count(f.webhooks.deliveries)} (${count(f.webhooks.refused)} refused)</dd>
        <dt>Channel messages</dt><dd>${count(f.channels.messagesIn)} in, ${count(f.channels.messagesOut)} out; ${count(f.channels.connected)} of ${count(f.channels.accounts)} accounts connected</dd>
        <dt>Store</dt><dd>${count(f.store.statements)} statements, p99 ${seconds(f.store.p99Seconds)}</dd>
        <dt>Process</dt><dd>${Math.round(f.process.residentBytes / 1048576)} MB resident, event-loop delay p99 ${f.process.eventLoopLagP99Seconds === null ? '—' : `${(f.process.eventLoopLagP99Seconds * 1000).toFixed(1)} ms`}</dd>
      </dl>`}
    </section>`;
  }

  private async refreshStatus(): Promise<void> {
    this.status = await this.call<StatusPayload>('status').catch(() => this.status);
  }

  protected override render() {
    const s = this.status;
    if (!s) return html`${this.alerts()}<p class="muted">Loading…</p>`;
    const problems = Object.entries(s.problems ?? {});
    return html`${this.alerts()}${this.approvalsCard()}
      <div class="grid">
        <section class="card" aria-labelledby="daemon-title">
          <h2 id="daemon-title">Daemon</h2>
          <dl class="facts">
            <dt>State</dt><dd><span class="badge ${s.readiness === 'ready' ? 'ok' : 'warn'}" data-testid="readiness">${s.readiness}</span></dd>
            <dt>Version</dt><dd>${s.version}</dd>
            <dt>Uptime</dt><dd data-testid="uptime">${duration(this.now - s.startedAt)}</dd>
            <dt>Listening</dt><dd><code>${s.url}</code> (${s.bind})</dd>
            <dt>Authentication</dt><dd>${s.authMode}</dd>
            <dt>Secret store</dt><dd>${s.secretStore}</dd>
            <dt>Clients</dt><dd>${s.connections}</dd>
            <dt>Memory</dt><dd>${Math.round(s.memory.rss / 1048576)} MB</dd>
          </dl>
        </section>
        <section class="card" aria-labelledby="ready-title">
          <h2 id="ready-title">Readiness</h2>
          ${problems.length === 0 ? html`<p><span class="badge ok">all checks pass</span></p>` : html`<ul class="plain">${problems.map(([name, reason]) => html`<li><span class="badge warn">${name}</span> ${reason}</li>`)}</ul>`}
          ${s.plugins.errors.length ? html`<h3>Plugin errors</h3><ul class="plain">${s.plugins.errors.map((e) => html`<li><strong>${e.plugin}</strong>: ${e.error}</li>`)}</ul>` : nothing}
        </section>
        <section class="card" aria-labelledby="channels-title">
          <h2 id="channels-title">Channels</h2>
          ${this.channels.length === 0 ? html`<p class="muted">No channel is configured.</p>` : html`
          <table><thead><tr><th scope="col">Channel</th><th scope="col">Account</th><th scope="col">State</th></tr></thead>
            <tbody>${this.channels.map((c) => html`<tr><td>${c.channel}</td><td>${c.account}</td>
              <td><span class="badge ${c.state === 'connected' ? 'ok' : c.state === 'error' ? 'bad' : 'warn'}">${c.state}</span>${c.detail ? html` <span class="muted wrap">${c.detail}</span>` : nothing}</td></tr>`)}</tbody></table>`}
        </section>
      </div>
      <section class="card" aria-labelledby="errors-title">
        <h2 id="errors-title">Recent errors</h2>
        ${this.errors === undefined ? html`<p class="muted">Reading the log needs the admin scope.</p>`
          : this.errors.length === 0 ? html`<p class="muted">No errors in the log.</p>`
          : html`<ul class="log">${this.errors.map((entry) => html`<li><time>${when(entry.time)}</time> <span class="level l${entry.level}">${LEVEL_NAMES[entry.level] ?? entry.level}</span> ${entry.msg}</li>`)}</ul>`}
      </section>
      ${this.spendCard()}
      ${this.figuresCard()}`;
  }
}
customElements.define('gw-overview', OverviewPage);
