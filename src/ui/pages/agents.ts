/** Agents: each one's model and tools, whom it answers on channels (its routes), its skills and whom it may hand tasks to. */
import { html, nothing } from 'lit';
import { Page } from '../page.ts';
import type { AgentInfo } from '../../shared/protocol/results.ts';

/** A route's match as people read it: "peer alice, room #ops". */
const describeMatch = (match: AgentInfo['routes'][number]['match']) =>
  Object.entries(match).map(([field, value]) => `${field} ${String(value)}`).join(', ') || 'everyone else';

export class AgentsPage extends Page {
  static override properties = { agents: { state: true } };
  declare agents: AgentInfo[] | undefined;

  protected async load(): Promise<void> {
    this.agents = (await this.call<{ agents: AgentInfo[] }>('agents.list')).agents;
  }

  protected override render() {
    const agents = this.agents;
    return html`${this.alerts()}
      <section class="card" aria-labelledby="agents-title">
        <h2 id="agents-title">Agents</h2>
        ${!agents ? html`<p class="muted">Loading…</p>` : agents.length === 0 ? html`<p class="muted">No agent is configured: set <code>agents.&lt;id&gt;.model</code> (see docs/agents.md).</p>` : html`
        <div class="scroll"><table>
          <thead><tr><th scope="col">Agent</th><th scope="col">Model</th><th scope="col">Answers on channels</th><th scope="col">Skills</th><th scope="col">Delegates to</th><th scope="col">Tools</th></tr></thead>
          <tbody>${agents.map((agent) => html`<tr data-testid="agent">
            <th scope="row">${agent.id}${agent.default ? html` <span class="muted">(default)</span>` : nothing}</th>
            <td>${agent.model ?? html`<span class="muted">none</span>`}</td>
            <td class="wrap" data-testid="agent-routes">${agent.routes.length === 0 ? html`<span class="muted">no channel</span>` : html`<ul class="plain">${agent.routes.map((route) => html`<li>
              ${route.channel}: ${describeMatch(route.match)}${route.order === null ? nothing : html` <span class="muted">(route ${route.order})</span>`}</li>`)}</ul>`}</td>
            <td class="wrap" data-testid="agent-skills">${agent.skills.length === 0 ? html`<span class="muted">none</span>` : agent.skills.map((skill) => (skill === '*' ? 'every installed skill' : skill)).join(', ')}</td>
            <td class="wrap" data-testid="agent-delegates">${agent.delegatesTo.join(', ') || html`<span class="muted">no one</span>`}</td>
            <td class="wrap">${agent.tools.join(', ') || html`<span class="muted">none</span>`}</td>
          </tr>`)}</tbody></table></div>`}
      </section>`;
  }
}
customElements.define('gw-agents', AgentsPage);
