/** Chat (WebChat): talk to an agent in a session, the reply streaming in, tool calls as they happen; abort a run; the session's history. */
import { html, nothing } from 'lit';
import { Page } from '../page.ts';
import { transcript } from './sessions.ts';
import type { AgentInfo, MessageView, SessionView } from '../../shared/protocol/results.ts';

interface ToolStep { id: string; name: string; args: unknown; result?: unknown; error?: string }

const newRunId = () => Array.from(crypto.getRandomValues(new Uint8Array(12)), (b) => b.toString(16).padStart(2, '0')).join('');

export class ChatPage extends Page {
  static override properties = {
    agents: { state: true }, agent: { state: true }, sessionKey: { state: true }, sessions: { state: true }, history: { state: true },
    runId: { state: true }, streaming: { state: true }, tools: { state: true },
  };
  declare agents: AgentInfo[] | undefined;
  declare agent: string;
  declare sessionKey: string;
  declare sessions: SessionView[];
  declare history: MessageView[];
  declare runId: string | undefined;
  declare streaming: string;
  declare tools: ToolStep[];

  constructor() {
    super();
    this.agent = '';
    this.sessionKey = '';
    this.sessions = [];
    this.history = [];
    this.streaming = '';
    this.tools = [];
  }

  protected async load(): Promise<void> {
    this.listen('agent.delta', (payload) => {
      const p = payload as { runId: string; text: string };
      if (p.runId === this.runId) this.streaming += p.text;
    });
    this.listen('agent.tool', (payload) => {
      const p = payload as { runId: string; phase: string; id: string; name: string; args: unknown; result?: unknown; error?: string };
      if (p.runId !== this.runId) return;
      const others = this.tools.filter((t) => t.id !== p.id);
      this.tools = [...others, { id: p.id, name: p.name, args: p.args, ...(p.phase === 'result' ? { result: p.result, error: p.error } : {}) }];
    });
    const [agents, sessions] = await Promise.all([
      this.call<{ agents: AgentInfo[] }>('agents.list'),
      this.call<{ sessions: SessionView[] }>('sessions.list', { limit: 100 }),
    ]);
    this.agents = agents.agents;
    this.agent = agents.agents.find((a) => a.default)?.id ?? agents.agents[0]?.id ?? '';
    this.sessions = sessions.sessions.filter((s) => s.channel === 'chat');
    // This browser's own conversation with the agent, until another session is picked.
    const peer = `webchat-${this.gateway.device.id.slice(0, 12)}`;
    this.sessionKey = this.sessions.find((s) => s.peer === peer && s.account === this.agent)?.key ?? peer;
    await this.loadHistory();
  }

  /** A session's history; a name no session has yet starts a new one at the first message. */
  private async loadHistory(): Promise<void> {
    if (!this.sessions.some((s) => s.key === this.sessionKey)) {
      this.history = [];
      return;
    }
    this.history = (await this.call<{ messages: MessageView[] }>('sessions.history', { key: this.sessionKey, limit: 200 })).messages;
  }

  private async send(event: SubmitEvent): Promise<void> {
    event.preventDefault();
    const form = event.target as HTMLFormElement;
    const field = form.elements.namedItem('message') as HTMLTextAreaElement;
    const message = field.value.trim();
    if (!message || this.runId) return;
    field.value = '';
    const runId = newRunId();
    this.runId = runId;
    this.streaming = '';
    this.tools = [];
    this.history = [...this.history, { id: -1, direction: 'in', sender: 'you', senderName: 'you', text: message, at: new Date().toISOString(), role: 'user', kind: 'message' }];
    const result = await this.guard(() => this.call<{ sessionKey: string }>('agent.run', { agent: this.agent, sessionKey: this.sessionKey, message, runId }));
    this.runId = undefined;
    if (result) {
      this.sessionKey = result.sessionKey;
      this.sessions = (await this.call<{ sessions: SessionView[] }>('sessions.list', { limit: 100 })).sessions.filter((s) => s.channel === 'chat');
    }
    // The run's own failure (an abort, a provider error) stays on screen after the history is read again.
    const failure = this.error;
    await this.guard(() => this.loadHistory());
    this.error ??= failure;
    this.streaming = '';
    this.tools = [];
    field.focus();
  }

  private abort(): void {
    if (this.runId) void this.guard(() => this.call('agent.abort', { runId: this.runId }));
  }

  protected override render() {
    if (this.agents && this.agents.length === 0) return html`${this.alerts()}<p class="card">No agent is configured: set <code>agents.&lt;id&gt;.model</code> (see docs/agents.md).</p>`;
    return html`${this.alerts()}
      <form class="filters" @submit=${(e: Event) => e.preventDefault()}>
        <label for="chat-agent">Agent</label>
        <select id="chat-agent" @change=${(e: Event) => { this.agent = (e.target as HTMLSelectElement).value; }}>
          ${(this.agents ?? []).map((a) => html`<option value=${a.id} ?selected=${a.id === this.agent}>${a.id}${a.model ? ` (${a.model})` : ''}</option>`)}
        </select>
        <label for="chat-session">Session</label>
        <input id="chat-session" list="chat-sessions" .value=${this.sessionKey} maxlength="256"
          @change=${(e: Event) => { this.sessionKey = (e.target as HTMLInputElement).value.trim() || this.sessionKey; void this.guard(() => this.loadHistory()); }}>
        <datalist id="chat-sessions">${this.sessions.map((s) => html`<option value=${s.key}></option>`)}</datalist>
      </form>
      <section class="card chat" aria-label="Conversation">
        <div aria-live="polite" data-testid="conversation">
          ${transcript(this.history)}
          ${this.runId ? html`<div class="msg assistant streaming" data-testid="streaming">
            ${this.tools.map((t) => html`<div class="tool">${t.result === undefined && !t.error ? 'calling' : 'called'} <code>${t.name}</code> <code>${JSON.stringify(t.args)}</code>${t.error ? html` <span class="error-text">${t.error}</span>` : nothing}</div>`)}
            <div class="text">${this.streaming || '…'}</div></div>` : nothing}
        </div>
        <form class="composer" @submit=${(e: SubmitEvent) => void this.send(e)}>
          <label for="chat-message" class="sr-only">Message</label>
          <textarea id="chat-message" name="message" rows="2" required maxlength="100000" placeholder="Message the agent"
            @keydown=${(e: KeyboardEvent) => { if (e.key === 'Enter' && !e.shiftKey) { e.preventDefault(); (e.target as HTMLTextAreaElement).form?.requestSubmit(); } }}></textarea>
          ${this.runId ? html`<button type="button" class="danger" @click=${() => this.abort()}>Stop</button>` : html`<button type="submit" ?disabled=${!this.agent}>Send</button>`}
        </form>
      </section>`;
  }
}
customElements.define('gw-chat', ChatPage);
