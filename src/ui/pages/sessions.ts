/** Sessions: every channel and chat session, newest first, and a session's transcript; new messages arrive live. */
import { html, nothing } from 'lit';
import { Page, when } from '../page.ts';
import type { DelegationNode, DelegationView, MessageView, MethodResult, SessionDelegations, SessionView } from '../../shared/protocol/results.ts';

/** How a delegation stands, in a few words. */
const standing = (node: DelegationView) => (node.status === 'running' ? `running${node.wait ? '' : ', the answer to come as a new turn'}`
  : node.status === 'failed' ? `failed: ${node.error ?? ''}` : 'succeeded');

/** The tasks a session handed to other agents, and theirs in turn: each opens its child's session. */
const delegationTree = (nodes: DelegationNode[], open: (key: string) => void): unknown => html`<ul class="tree">${nodes.map((node) => html`<li data-testid="delegation">
  <button class="link" @click=${() => open(node.sessionKey)}>${node.agent}</button> <span class="muted">${standing(node)} · ${when(node.createdAt)}</span>
  <div class="preview">${node.task.slice(0, 160)}</div>
  ${node.children.length ? delegationTree(node.children, open) : nothing}</li>`)}</ul>`;

/** What a tool answered, as the transcript shows it: its error, or its result (text as it is, anything else as JSON), cut at 600 characters. */
const toolAnswer = (data: MessageView['data']): { failed: boolean; text: string } => {
  const failed = data?.error !== undefined && data?.error !== null;
  const value = failed ? data!.error : data?.result;
  const text = value === undefined ? '' : typeof value === 'string' ? value : JSON.stringify(value);
  return { failed, text: text.length > 600 ? `${text.slice(0, 600)}…` : text };
};

export const transcript = (messages: MessageView[]) => html`<ol class="transcript">${messages.map((m) => html`
  <li class="msg ${m.role} ${m.kind}"><span class="who">${m.senderName ?? m.sender}</span> <time>${when(m.at)}</time>
    ${m.kind === 'tool_call' ? html`<div class="tool">calls <code>${String(m.data?.name ?? '')}</code> <code>${JSON.stringify(m.data?.args ?? {})}</code></div>`
      : m.kind === 'tool_result' ? ((answer) => html`<div class="tool" data-testid="tool-result">${answer.failed ? 'failed' : 'answered'} <code>${answer.text || m.text}</code></div>`)(toolAnswer(m.data))
      : m.kind === 'summary' ? html`<div class="tool">summary of ${String((m.data?.summarises as { count?: number } | undefined)?.count ?? '')} earlier messages (kept above)</div><div class="text">${m.text}</div>`
      : html`<div class="text">${m.text}</div>`}</li>`)}</ol>`;

export class SessionsPage extends Page {
  static override properties = { sessions: { state: true }, open: { state: true }, messages: { state: true }, delegation: { state: true } };
  declare sessions: SessionView[] | undefined;
  declare open: SessionView | undefined;
  declare messages: MessageView[];
  declare delegation: SessionDelegations | undefined;

  constructor() {
    super();
    this.messages = [];
  }

  protected async load(): Promise<void> {
    this.listen('session.message', (payload) => {
      const { session, message } = payload as { session: SessionView; message: MessageView };
      this.sessions = [session, ...(this.sessions ?? []).filter((s) => s.key !== session.key)];
      if (this.open?.key === session.key) this.messages = [...this.messages, message];
    });
    this.sessions = (await this.call<{ sessions: SessionView[] }>('sessions.list', { limit: 200 })).sessions;
  }

  private async show(session: Pick<SessionView, 'key'>): Promise<void> {
    await this.guard(async () => {
      const history = await this.call<MethodResult<'sessions.history'>>('sessions.history', { key: session.key, limit: 200 });
      this.open = history.session;
      this.messages = history.messages;
      this.delegation = history.delegation;
    });
  }

  protected override render() {
    return html`${this.alerts()}
      <div class="split">
        <section class="card" aria-labelledby="list-title">
          <h2 id="list-title">Sessions</h2>
          ${!this.sessions ? html`<p class="muted">Loading…</p>` : this.sessions.length === 0 ? html`<p class="muted">No sessions yet.</p>` : html`
          <ul class="items" data-testid="sessions">${this.sessions.map((s) => html`<li>
            <button class="link" aria-current=${this.open?.key === s.key ? 'true' : 'false'} @click=${() => void this.show(s)}>${s.channel === 'delegate' ? `${s.account}: a task from ${s.peerName ?? s.peer}` : s.peerName ?? s.peer}</button>
            <span class="muted">${s.channel}/${s.account} · ${s.kind} · ${s.messageCount} messages · ${when(s.updatedAt)}</span>
            ${s.lastMessage ? html`<span class="preview">${s.lastMessage.text.slice(0, 120)}</span>` : nothing}
          </li>`)}</ul>`}
        </section>
        <section class="card" aria-labelledby="transcript-title" aria-live="polite">
          <h2 id="transcript-title">${this.open ? `Transcript: ${this.open.peerName ?? this.open.peer}` : 'Transcript'}</h2>
          ${this.delegation ? html`<section aria-label="Delegations" data-testid="delegations">
            ${this.delegation.parent ? html`<p>A task <button class="link" @click=${() => void this.show({ key: this.delegation!.parent!.parentSession })}>${this.delegation.parent.parentAgent}</button> delegated to ${this.delegation.parent.agent} (${standing(this.delegation.parent)}).</p>` : nothing}
            ${this.delegation.children.length ? html`<h3>Delegated tasks</h3>${delegationTree(this.delegation.children, (key) => void this.show({ key }))}` : nothing}
          </section>` : nothing}
          ${this.open ? transcript(this.messages) : html`<p class="muted">Pick a session.</p>`}
        </section>
      </div>`;
  }
}
customElements.define('gw-sessions', SessionsPage);
