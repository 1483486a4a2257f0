/** Tokens: product access tokens for the HTTP API; a new token's value is shown once, with a copy button. */
import { html, nothing } from 'lit';
import { copyText, Page, when } from '../page.ts';
import type { AccessTokenView, TokenCreated } from '../../shared/protocol/results.ts';

const SCOPES = ['tokens:read', 'tokens:write', 'jobs:read', 'jobs:write', 'tools:invoke', 'inference', 'metrics', 'admin'];

export class TokensPage extends Page {
  static override properties = { tokens: { state: true }, created: { state: true }, copied: { state: true } };
  declare tokens: AccessTokenView[] | undefined;
  declare created: TokenCreated | undefined;
  declare copied: boolean;

  protected async load(): Promise<void> {
    this.tokens = (await this.call<{ tokens: AccessTokenView[] }>('tokens.list')).tokens;
  }

  private async create(event: SubmitEvent): Promise<void> {
    event.preventDefault();
    const form = event.target as HTMLFormElement;
    const data = new FormData(form);
    const scopes = data.getAll('scope').map(String);
    const expires = String(data.get('expires') ?? '');
    await this.guard(async () => {
      this.created = await this.call<TokenCreated>('tokens.create', {
        name: String(data.get('name') ?? '').trim(), scopes, ...(expires ? { expiresAt: new Date(`${expires}T23:59:59Z`).toISOString() } : {}),
      });
      this.copied = false;
      form.reset();
      await this.load();
    });
  }

  private async revoke(token: AccessTokenView): Promise<void> {
    if (!confirm(`Revoke the token ${token.name}? Callers using it, or a token made with it, are refused at once.`)) return;
    await this.guard(async () => {
      await this.call('tokens.revoke', { id: token.id });
      this.notice = `Revoked ${token.name}.`;
      await this.load();
    });
  }

  protected override render() {
    const admin = this.gateway.has('operator.admin');
    return html`${this.alerts()}
      ${this.created ? html`
        <section class="card reveal" aria-labelledby="new-token-title">
          <h2 id="new-token-title">New token ${this.created.name}</h2>
          <p>Copy it now: it is shown this once, and the gateway keeps only its hash.</p>
          <div class="row"><input id="new-token" readonly aria-label="the new token" .value=${this.created.token} data-testid="new-token">
            <button @click=${async () => { this.copied = await copyText(this.created!.token, this.querySelector<HTMLInputElement>('#new-token')); }}>${this.copied ? 'Copied' : 'Copy'}</button>
            <button class="secondary" @click=${() => { this.created = undefined; }}>Done</button></div>
        </section>` : nothing}
      ${admin ? html`
        <form class="card" @submit=${(e: SubmitEvent) => void this.create(e)} aria-labelledby="create-title">
          <h2 id="create-title">Create a token</h2>
          <label for="token-name">Name</label>
          <input id="token-name" name="name" required maxlength="64" autocomplete="off">
          <fieldset><legend>Scopes</legend>
            ${SCOPES.map((scope) => html`<label class="check"><input type="checkbox" name="scope" value=${scope}> ${scope}</label>`)}
          </fieldset>
          <label for="token-expires">Expires (optional)</label>
          <input id="token-expires" name="expires" type="date">
          <button type="submit">Create</button>
        </form>` : nothing}
      <section class="card" aria-labelledby="tokens-title">
        <h2 id="tokens-title">Tokens</h2>
        ${!this.tokens ? html`<p class="muted">Loading…</p>` : this.tokens.length === 0 ? html`<p class="muted">No tokens yet.</p>` : html`
        <div class="scroll"><table>
          <thead><tr><th scope="col">Name</th><th scope="col">Token</th><th scope="col">Scopes</th><th scope="col">Expires</th><th scope="col">Last used</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
          <tbody>${this.tokens.map((token) => html`<tr>
            <td>${token.name}</td><td><code>${token.masked}</code></td><td>${token.scopes.join(', ')}</td><td>${when(token.expiresAt)}</td><td>${when(token.lastUsedAt)}</td>
            <td>${token.revokedAt ? html`<span class="badge bad">revoked</span>` : admin ? html`<button class="danger" @click=${() => void this.revoke(token)} aria-label="Revoke ${token.name}">Revoke</button>` : nothing}</td>
          </tr>`)}</tbody></table></div>`}
      </section>`;
  }
}
customElements.define('gw-tokens', TokensPage);
