/** What every page of the Control UI shares: the gateway connection, event subscriptions that end with the page, and error display. */
import { html, LitElement, nothing, type PropertyDeclarations, type TemplateResult } from 'lit';
import type { Gateway } from './gateway.ts';

export abstract class Page extends LitElement {
  static override properties: PropertyDeclarations = { error: { state: true }, notice: { state: true } };
  declare error: string | undefined;
  declare notice: string | undefined;
  gateway!: Gateway;
  private readonly stops: (() => void)[] = [];

  /** Light DOM: the page's one style sheet applies, and no inline style is needed (the CSP allows none). */
  protected override createRenderRoot(): HTMLElement {
    return this;
  }

  override connectedCallback(): void {
    super.connectedCallback();
    void this.guard(() => this.load());
  }

  override disconnectedCallback(): void {
    super.disconnectedCallback();
    for (const stop of this.stops.splice(0)) stop();
    this.leave();
  }

  /** Fetches what the page shows; called when it opens. */
  protected abstract load(): Promise<void>;

  /** Called when the page closes. */
  protected leave(): void {}

  /** Runs a listener for a gateway event while the page is open. */
  protected listen(event: string, listener: (payload: unknown) => void): void {
    this.stops.push(this.gateway.on(event, listener));
  }

  /** Runs an action, showing its failure on the page instead of losing it. */
  protected async guard<T>(action: () => Promise<T>): Promise<T | undefined> {
    try {
      this.error = undefined;
      return await action();
    } catch (error) {
      this.error = error instanceof Error ? error.message : String(error);
      return undefined;
    }
  }

  protected call<T>(method: string, params?: Record<string, unknown>): Promise<T> {
    return this.gateway.request<T>(method, params);
  }

  protected alerts(): TemplateResult | typeof nothing {
    if (!this.error && !this.notice) return nothing;
    return html`${this.error ? html`<p class="alert error" role="alert">${this.error}</p>` : nothing}${this.notice ? html`<p class="alert notice" role="status">${this.notice}</p>` : nothing}`;
  }
}

export const when = (iso: string | null | undefined): string => {
  if (!iso) return '—';
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : date.toLocaleString();
};

export const duration = (ms: number): string => {
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${s % 60}s`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h ${m % 60}m`;
  return `${Math.floor(h / 24)}d ${h % 24}h`;
};

/** Copies text, with the old way where the page is not a secure context (no clipboard API there). */
export async function copyText(text: string, fallbackField?: HTMLInputElement | HTMLTextAreaElement | null): Promise<boolean> {
  try {
    if (navigator.clipboard && globalThis.isSecureContext) {
      await navigator.clipboard.writeText(text);
      return true;
    }
  } catch {
    // fall through to selecting the field
  }
  if (fallbackField) {
    fallbackField.focus();
    fallbackField.select();
    return document.execCommand('copy');
  }
  return false;
}

export { LOG_LEVEL_NAMES as LEVEL_NAMES, LOG_LEVEL_VALUES } from '../shared/log-line.ts';
