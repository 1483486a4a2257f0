/**
 * Plugins and tools: what each module and plugin registered and why one failed
 * to load; MCP servers, their state live, and their OAuth login; invoke a tool
 * with a form generated from its input schema, dry run first.
 */
import { html, nothing, type TemplateResult } from 'lit';
import { Page } from '../page.ts';
import type { BuildOutcome, McpServerInfo, PluginInfo, ToolCatalogEntry } from '../../shared/protocol/results.ts';

interface Property { type?: string | string[]; description?: string; enum?: unknown[]; default?: unknown }

export class ToolsPage extends Page {
  static override properties = {
    plugins: { state: true }, lastReload: { state: true }, mcp: { state: true }, logins: { state: true },
    tools: { state: true }, chosen: { state: true }, answer: { state: true }, checked: { state: true }, problems: { state: true },
  };
  declare plugins: PluginInfo[] | undefined;
  declare mcp: McpServerInfo[] | undefined;
  /** Logins started from this page: the authorization URL to open, per server. */
  declare logins: Record<string, string>;
  declare lastReload: BuildOutcome | null;
  declare tools: ToolCatalogEntry[];
  declare chosen: ToolCatalogEntry | undefined;
  declare answer: { label: string; value: unknown } | undefined;
  /** The arguments a dry run accepted: invoking sends exactly these. */
  declare checked: string | undefined;
  declare problems: Record<string, string>;

  constructor() {
    super();
    this.tools = [];
    this.lastReload = null;
    this.problems = {};
    this.logins = {};
  }

  protected async load(): Promise<void> {
    this.listen('mcp.status', (payload) => {
      const info = payload as McpServerInfo;
      const others = (this.mcp ?? []).filter((s) => s.name !== info.name);
      this.mcp = info.state === 'disabled' && info.reason === 'removed' ? others : [...others, info].sort((a, b) => a.name.localeCompare(b.name));
      if (info.state === 'connected' && this.logins[info.name]) {
        const { [info.name]: _done, ...rest } = this.logins;
        this.logins = rest;
        this.notice = `MCP server ${info.name} is connected with ${info.tools} tool${info.tools === 1 ? '' : 's'}.`;
      }
      // Its tools came or went.
      void this.guard(async () => { this.tools = (await this.call<{ tools: ToolCatalogEntry[] }>('tools.catalog')).tools; });
    });
    const [plugins, tools, mcp] = await Promise.all([
      this.call<{ plugins: PluginInfo[]; lastReload: BuildOutcome | null }>('plugins.list'),
      this.call<{ tools: ToolCatalogEntry[] }>('tools.catalog'),
      this.call<{ servers: McpServerInfo[] }>('mcp.list'),
    ]);
    this.plugins = plugins.plugins;
    this.lastReload = plugins.lastReload;
    this.tools = tools.tools;
    this.mcp = mcp.servers.sort((a, b) => a.name.localeCompare(b.name));
  }

  /** Starts the OAuth login; the authorization server is opened from a link, in a tab of its own, and the callback page finishes it. */
  private async login(name: string): Promise<void> {
    this.notice = undefined;
    const started = await this.guard(() => this.call<{ server: McpServerInfo; authorizationUrl?: string }>('mcp.login', { name }));
    if (!started) return;
    if (!started.authorizationUrl) {
      this.notice = `MCP server ${name} needs no login: it is ${started.server.state}.`;
      return;
    }
    this.logins = { ...this.logins, [name]: started.authorizationUrl };
  }

  private async logout(name: string): Promise<void> {
    const done = await this.guard(() => this.call<{ server: McpServerInfo }>('mcp.logout', { name }));
    if (done) this.notice = `Logged out of MCP server ${name}.`;
  }

  private args(form: HTMLFormElement): Record<string, unknown> | undefined {
    const args: Record<string, unknown> = {};
    const problems: Record<string, string> = {};
    for (const element of Array.from(form.querySelectorAll<HTMLInputElement | HTMLTextAreaElement | HTMLSelectElement>('[data-arg]'))) {
      const name = element.dataset.arg!;
      const kind = element.dataset.kind;
      if (kind === 'boolean') {
        if ((element as HTMLInputElement).checked) args[name] = true;
        continue;
      }
      if (element.value.trim() === '') continue;
      if (kind === 'number' || kind === 'integer') {
        const value = Number(element.value);
        if (!Number.isFinite(value)) problems[name] = `${name} must be a number`;
        else args[name] = value;
      } else if (kind === 'json') {
        try {
          args[name] = JSON.parse(element.value);
        } catch {
          problems[name] = `${name} is not valid JSON`;
        }
      } else {
        args[name] = element.value;
      }
    }
    this.problems = problems;
    return Object.keys(problems).length ? undefined : args;
  }

  private async run(form: HTMLFormElement, dryRun: boolean): Promise<void> {
    const args = this.args(form);
    if (!args || !this.chosen) return;
    const serialized = JSON.stringify(args);
    if (!dryRun && serialized !== this.checked) {
      this.error = 'The arguments changed since the dry run: run it again first.';
      return;
    }
    const result = await this.guard(() => this.call<{ result: unknown }>('tools.invoke', { tool: this.chosen!.name, args, dryRun }));
    if (result === undefined) {
      this.checked = undefined;
      return;
    }
    this.answer = { label: dryRun ? 'Dry run: the arguments are accepted' : 'Result', value: result.result };
    this.checked = dryRun ? serialized : undefined;
  }

  protected override render() {
    return html`${this.alerts()}
      ${this.mcpServers()}
      <section class="card" aria-labelledby="tools-title">
        <h2 id="tools-title">Tools</h2>
        <label for="tool-pick">Tool</label>
        <select id="tool-pick" @change=${(e: Event) => { this.chosen = this.tools.find((t) => t.name === (e.target as HTMLSelectElement).value); this.answer = undefined; this.checked = undefined; this.problems = {}; }}>
          <option value="">choose a tool</option>
          ${this.tools.map((t) => html`<option value=${t.name}>${t.name}${t.dangerous ? ' (dangerous)' : ''}</option>`)}
        </select>
        ${this.chosen ? this.invokeForm(this.chosen) : nothing}
        ${this.answer ? html`<h3>${this.answer.label}</h3><pre data-testid="tool-answer">${JSON.stringify(this.answer.value, null, 2)}</pre>` : nothing}
      </section>
      <section class="card" aria-labelledby="plugins-title">
        <h2 id="plugins-title">Modules and plugins</h2>
        ${this.lastReload && !this.lastReload.ok ? html`<p class="alert error">The last reload had errors: ${this.lastReload.errors.map((e) => `${e.plugin}: ${e.error}`).join('; ')}</p>` : nothing}
        ${!this.plugins ? html`<p class="muted">Loading…</p>` : html`
        <div class="scroll"><table>
          <thead><tr><th scope="col">Name</th><th scope="col">Status</th><th scope="col">Registered</th></tr></thead>
          <tbody>${this.plugins.map((p) => html`<tr>
            <td>${p.name}${p.builtin ? html` <span class="muted">built in</span>` : nothing}</td>
            <td>${p.status === 'loaded' ? html`<span class="badge ok">loaded</span>` : html`<span class="badge bad">error</span> <span class="error-text">${p.error}</span>`}</td>
            <td class="small">${summary(p)}</td></tr>`)}</tbody></table></div>`}
      </section>`;
  }

  private mcpServers(): TemplateResult {
    const servers = this.mcp;
    return html`<section class="card" aria-labelledby="mcp-title">
      <h2 id="mcp-title">MCP servers</h2>
      ${!servers ? html`<p class="muted">Loading…</p>` : servers.length === 0 ? html`<p class="muted">None yet: <code>gateway mcp add &lt;name&gt; &lt;url&gt;</code> adds one.</p>` : html`
      <div class="scroll"><table data-testid="mcp-servers">
        <thead><tr><th scope="col">Name</th><th scope="col">State</th><th scope="col">Tools</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
        <tbody>${servers.map((s) => html`<tr>
          <td>${s.name}<div class="muted small">${s.url}</div></td>
          <td><span class="badge ${s.state === 'connected' ? 'ok' : s.state === 'error' || s.state === 'needs-login' ? 'bad' : ''}">${s.state}</span>${s.reason ? html`<div class="small">${s.reason}</div>` : nothing}</td>
          <td>${s.tools}</td>
          <td class="row">
            ${s.state === 'needs-login' || s.auth === 'oauth' ? html`<button type="button" aria-label="Log in to ${s.name}" @click=${() => void this.login(s.name)}>${s.state === 'connected' ? 'Log in again' : 'Log in'}</button>` : nothing}
            ${s.auth === 'oauth' ? html`<button type="button" class="danger" aria-label="Log out of ${s.name}" @click=${() => void this.logout(s.name)}>Log out</button>` : nothing}
            ${this.logins[s.name] ? html`<a href=${this.logins[s.name]} target="_blank" rel="noopener noreferrer">Open the authorization server for ${s.name}</a>` : nothing}
          </td></tr>`)}</tbody></table></div>`}
    </section>`;
  }

  private invokeForm(tool: ToolCatalogEntry): TemplateResult {
    const schema = tool.inputSchema as { properties?: Record<string, Property>; required?: string[] };
    const required = new Set(schema.required ?? []);
    return html`<form class="tool-form" @submit=${(e: SubmitEvent) => { e.preventDefault(); void this.run(e.target as HTMLFormElement, true); }}>
      <p>${tool.description}</p>
      <p class="muted">From ${tool.plugin}${tool.overHttp ? '; callable over HTTP' : '; not callable over HTTP'}.</p>
      ${Object.entries(schema.properties ?? {}).map(([name, property]) => argField(name, property, required.has(name), this.problems[name]))}
      <div class="row">
        <button type="submit">Dry run</button>
        <button type="button" ?disabled=${this.checked === undefined} @click=${(e: Event) => void this.run((e.target as HTMLButtonElement).form!, false)}>Invoke</button>
      </div>
    </form>`;
  }
}

const summary = (p: PluginInfo): string => {
  const r = p.registered;
  const parts = [['routes', r.routes], ['methods', r.methods], ['tools', r.tools], ['channels', r.channels], ['job kinds', r.jobKinds]] as const;
  return parts.filter(([, list]) => list.length).map(([label, list]) => `${label}: ${list.join(', ')}`).join(' · ') || '—';
};

function argField(name: string, property: Property, required: boolean, problem: string | undefined): TemplateResult {
  const id = `arg-${name.replace(/[^A-Za-z0-9_-]/g, '-')}`;
  const type = Array.isArray(property.type) ? property.type.find((t) => t !== 'null') : property.type;
  const label = html`${name}${required ? html` <span class="muted">(required)</span>` : nothing}`;
  const tail = html`${property.description ? html`<p class="hint" id="${id}-hint">${property.description}</p>` : nothing}${problem ? html`<p class="problem" role="alert">${problem}</p>` : nothing}`;
  if (type === 'boolean') return html`<div class="field"><label class="check"><input type="checkbox" id=${id} data-arg=${name} data-kind="boolean"> ${label}</label>${tail}</div>`;
  if (property.enum) {
    return html`<div class="field"><label for=${id}>${label}</label><select id=${id} data-arg=${name} data-kind="string"><option value=""></option>
      ${property.enum.map((option) => html`<option value=${String(option)}>${String(option)}</option>`)}</select>${tail}</div>`;
  }
  if (type === 'string' || type === 'number' || type === 'integer') {
    return html`<div class="field"><label for=${id}>${label}</label><input id=${id} data-arg=${name} data-kind=${type} ?required=${required} aria-describedby="${id}-hint"
      inputmode=${type === 'string' ? 'text' : 'decimal'}>${tail}</div>`;
  }
  return html`<div class="field"><label for=${id}>${label} <span class="muted">(JSON)</span></label><textarea id=${id} class="code" rows="3" data-arg=${name} data-kind="json"></textarea>${tail}</div>`;
}
customElements.define('gw-tools', ToolsPage);
