/**
 * The shell: who this browser is to the gateway (signing in, waiting for
 * approval, connected, offline), the navigation between pages, and the page
 * in view. Pages are addressed by the URL's fragment (#/jobs), so no path of
 * the page's own can collide with the gateway's HTTP API.
 */
import { html, LitElement, nothing, type TemplateResult } from 'lit';
import { Gateway, type ConnectionState } from './gateway.ts';
import type { Page } from './page.ts';

interface Section { id: string; label: string; tag: string; scope?: string }

export const SECTIONS: Section[] = [
  { id: 'overview', label: 'Overview', tag: 'gw-overview' },
  { id: 'chat', label: 'Chat', tag: 'gw-chat' },
  { id: 'sessions', label: 'Sessions', tag: 'gw-sessions' },
  { id: 'agents', label: 'Agents', tag: 'gw-agents' },
  { id: 'pairing', label: 'Pairing', tag: 'gw-pairing', scope: 'operator.pairing' },
  { id: 'tokens', label: 'Tokens', tag: 'gw-tokens' },
  { id: 'jobs', label: 'Jobs', tag: 'gw-jobs' },
  { id: 'automations', label: 'Automations', tag: 'gw-automations' },
  { id: 'skills', label: 'Skills', tag: 'gw-skills' },
  { id: 'logs', label: 'Logs', tag: 'gw-logs', scope: 'operator.admin' },
  { id: 'config', label: 'Config', tag: 'gw-config' },
  { id: 'tools', label: 'Plugins & tools', tag: 'gw-tools' },
];

const sectionOf = (hash: string): Section => SECTIONS.find((section) => hash === `#/${section.id}`) ?? SECTIONS[0]!;

export class GatewayApp extends LitElement {
  static override properties = { state: { state: true }, section: { state: true }, failure: { state: true } };
  declare state: ConnectionState;
  declare section: Section;
  declare failure: string | undefined;
  private readonly gateway = new Gateway();
  private readonly onHash = () => {
    this.section = sectionOf(location.hash);
    document.title = `${this.section.label} · Gateway`;
  };

  constructor() {
    super();
    this.state = this.gateway.state;
    this.section = sectionOf(location.hash);
  }

  protected override createRenderRoot(): HTMLElement {
    return this;
  }

  override connectedCallback(): void {
    super.connectedCallback();
    window.addEventListener('hashchange', this.onHash);
    this.gateway.addEventListener('state', () => { this.state = this.gateway.state; });
    this.gateway.start().catch((error: unknown) => { this.failure = error instanceof Error ? error.message : String(error); });
  }

  override disconnectedCallback(): void {
    super.disconnectedCallback();
    window.removeEventListener('hashchange', this.onHash);
  }

  protected override render(): TemplateResult {
    const connected = this.state.kind === 'connected';
    return html`
      <a class="skip" href="#main">Skip to content</a>
      <header class="bar">
        <span class="brand"><img src="assets/icon.svg" alt="" width="24" height="24"> Gateway
          ${this.gateway.settings ? html`<span class="muted">· ${this.gateway.settings.profile}</span>` : nothing}</span>
        <span class="status" role="status" aria-live="polite">${this.describe()}</span>
        ${connected ? html`<button class="link" @click=${() => void this.gateway.signOut()}>Sign out</button>` : nothing}
      </header>
      ${connected ? this.nav() : nothing}
      <main id="main" tabindex="-1">${this.failure ? html`<p class="alert error" role="alert">${this.failure}</p>` : this.body()}</main>`;
  }

  private describe(): string {
    switch (this.state.kind) {
      case 'connected': return 'Connected';
      case 'offline': return `Offline: retrying in ${Math.ceil(this.state.retryInMs / 1000)} s`;
      case 'pairing': return 'Waiting for approval';
      case 'login': return 'Signed out';
      case 'refused': return 'Not allowed';
      default: return 'Connecting…';
    }
  }

  private nav(): TemplateResult {
    return html`<nav aria-label="Sections"><ul>${SECTIONS.filter((section) => !section.scope || this.gateway.has(section.scope)).map((section) => html`
      <li><a href="#/${section.id}" aria-current=${section === this.section ? 'page' : 'false'}>${section.label}</a></li>`)}</ul></nav>`;
  }

  private body(): TemplateResult {
    const state = this.state;
    switch (state.kind) {
      case 'connected': {
        const page = document.createElement(this.section.tag) as Page;
        page.gateway = this.gateway;
        return html`<h1>${this.section.label}</h1>${page}`;
      }
      case 'login': return this.login(state.reason);
      case 'pairing': return html`
        <section class="card narrow" aria-labelledby="pairing-title">
          <h1 id="pairing-title">Waiting for approval</h1>
          <p>This browser is a new device for this gateway. On the gateway host, approve it:</p>
          <pre class="command">gateway devices approve ${state.requestId}</pre>
          <p>Request code <strong class="code">${state.requestId}</strong>. This page goes on by itself once it is approved.</p>
          <button class="secondary" @click=${() => void this.gateway.signOut()}>Cancel</button>
        </section>`;
      case 'offline': return html`<section class="card narrow"><h1>The gateway is not answering</h1><p>${state.reason}</p><p>Retrying in ${Math.ceil(state.retryInMs / 1000)} s.</p></section>`;
      case 'refused': return html`<section class="card narrow"><h1>Not allowed</h1><p>${state.reason}</p></section>`;
      default: return html`<p class="muted">Connecting to the gateway…</p>`;
    }
  }

  private login(reason: string | undefined): TemplateResult {
    const mode = this.gateway.settings?.authMode ?? 'token';
    const submit = (event: SubmitEvent) => {
      event.preventDefault();
      const data = new FormData(event.target as HTMLFormElement);
      const secret = String(data.get('secret') ?? '').trim();
      const invite = String(data.get('invite') ?? '').trim();
      if (invite) this.gateway.signIn({ inviteCode: invite });
      else if (secret) this.gateway.signIn(mode === 'password' ? { password: secret } : { token: secret });
    };
    return html`
      <section class="card narrow" aria-labelledby="login-title">
        <h1 id="login-title">Sign in to this gateway</h1>
        ${reason ? html`<p class="alert error" role="alert">${reason}</p>` : nothing}
        <form @submit=${submit}>
          <label for="secret">Gateway ${mode === 'password' ? 'password' : 'token'}</label>
          <input id="secret" name="secret" type="password" autocomplete="off" spellcheck="false">
          <p class="hint">Kept for this tab only; once signed in, this browser uses its own device key.</p>
          <label for="invite">or a one-time invite code</label>
          <input id="invite" name="invite" autocomplete="off" spellcheck="false" aria-describedby="invite-hint">
          <p class="hint" id="invite-hint">On the gateway host, <code>gateway dashboard</code> or <code>gateway devices invite</code> prints one.</p>
          <button type="submit">Sign in</button>
        </form>
      </section>`;
  }
}

customElements.define('gw-app', GatewayApp);
