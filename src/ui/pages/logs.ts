/** Logs: the daemon's log as it is written, filtered by level and text. */
import { html } from 'lit';
import { LEVEL_NAMES, LOG_LEVEL_VALUES, Page, when } from '../page.ts';
import type { LogEntry } from '../../shared/protocol/results.ts';

const KEEP = 1000;
const LEVELS = Object.keys(LOG_LEVEL_VALUES);

export class LogsPage extends Page {
  static override properties = { entries: { state: true }, level: { state: true }, text: { state: true }, paused: { state: true } };
  declare entries: LogEntry[];
  declare level: string;
  declare text: string;
  declare paused: boolean;

  constructor() {
    super();
    this.entries = [];
    this.level = 'info';
    this.text = '';
    this.paused = false;
  }

  protected async load(): Promise<void> {
    this.listen('log.entries', (payload) => {
      if (this.paused) return;
      this.entries = [...this.entries, ...(payload as { entries: LogEntry[] }).entries].slice(-KEEP);
    });
    await this.follow();
  }

  private async follow(): Promise<void> {
    const tail = await this.call<{ entries: LogEntry[] }>('logs.tail', { lines: 300, level: this.level });
    this.entries = tail.entries;
    await this.call('logs.follow', { level: this.level });
  }

  protected override leave(): void {
    this.gateway.request('logs.unfollow').catch(() => undefined);
  }

  protected override updated(): void {
    const list = this.querySelector('.log');
    if (list && !this.paused) list.scrollTop = list.scrollHeight;
  }

  protected override render() {
    const needle = this.text.toLowerCase();
    const floor = LOG_LEVEL_VALUES[this.level] ?? 0;
    const shown = this.entries.filter((e) => e.level >= floor && (!needle || JSON.stringify(e).toLowerCase().includes(needle)));
    return html`${this.alerts()}
      <form class="filters" role="search" @submit=${(e: Event) => e.preventDefault()}>
        <label for="log-level">Level</label>
        <select id="log-level" @change=${(e: Event) => { this.level = (e.target as HTMLSelectElement).value; void this.guard(() => this.follow()); }}>
          ${LEVELS.map((l) => html`<option value=${l} ?selected=${l === this.level}>${l}</option>`)}
        </select>
        <label for="log-text">Text</label>
        <input id="log-text" type="search" .value=${this.text} @input=${(e: Event) => { this.text = (e.target as HTMLInputElement).value; }}>
        <button type="button" class="secondary" aria-pressed=${this.paused ? 'true' : 'false'} @click=${() => { this.paused = !this.paused; }}>${this.paused ? 'Resume' : 'Pause'}</button>
      </form>
      <ol class="log" role="log" aria-label="Log lines" data-testid="log">${shown.map((e) => html`<li>
        <time>${when(e.time)}</time> <span class="level l${e.level}">${LEVEL_NAMES[e.level] ?? e.level}</span> ${e.msg}
        ${extra(e)}</li>`)}</ol>`;
  }
}

const extra = (entry: LogEntry) => {
  const { level, time, msg, pid, profile, hostname, ...rest } = entry;
  void level; void time; void msg; void pid; void profile; void hostname;
  const keys = Object.keys(rest);
  return keys.length ? html`<span class="muted">${JSON.stringify(rest)}</span>` : '';
};
customElements.define('gw-logs', LogsPage);
