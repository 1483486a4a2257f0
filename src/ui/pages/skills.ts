/**
 * Skills: those installed (and the agents that may use each), and those
 * agents wrote that wait for an operator, shown whole (instructions and
 * files) before they are approved or rejected.
 */
import { html, nothing } from 'lit';
import { Page, when } from '../page.ts';
import type { MethodResult, SkillView } from '../../shared/protocol/results.ts';
import { visibleText } from '../../shared/visible-text.ts';

type Shown = MethodResult<'skills.show'>;

export class SkillsPage extends Page {
  static override properties = { skills: { state: true }, drafts: { state: true }, shown: { state: true } };
  declare skills: SkillView[] | undefined;
  declare drafts: SkillView[];
  declare shown: Shown | undefined;

  constructor() {
    super();
    this.drafts = [];
  }

  protected async load(): Promise<void> {
    const listed = await this.call<MethodResult<'skills.list'>>('skills.list');
    this.skills = listed.skills;
    this.drafts = listed.drafts;
  }

  private async show(skill: SkillView): Promise<void> {
    await this.guard(async () => {
      this.shown = await this.call<Shown>('skills.show', { name: skill.name, draft: skill.status === 'draft' });
    });
  }

  private async decide(skill: SkillView, approve: boolean): Promise<void> {
    await this.guard(async () => {
      if (approve) await this.call('skills.approve', { name: skill.name });
      else await this.call('skills.remove', { name: skill.name, draft: true });
      this.notice = approve ? `Approved ${skill.name}: installed.` : `Rejected ${skill.name}.`;
      this.shown = undefined;
      await this.load();
    });
  }

  private table(skills: SkillView[], drafts: boolean) {
    const admin = this.gateway.has('operator.admin');
    return html`<div class="scroll"><table>
      <thead><tr><th scope="col">Name</th><th scope="col">Description</th><th scope="col">Files</th><th scope="col">From</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
      <tbody>${skills.map((skill) => html`<tr data-testid=${drafts ? 'draft' : 'skill'}>
        <td>${skill.name}</td><td class="wrap">${visibleText(skill.description)}</td><td>${skill.files}</td>
        <td class="wrap">${visibleText(skill.source)}${skill.installedAt ? html`<div class="muted">${when(skill.installedAt)}</div>` : nothing}</td>
        <td><div class="row"><button class="secondary" @click=${() => void this.show(skill)} aria-label="Show ${skill.name}">Show</button>
          ${drafts && admin ? html`<button @click=${() => void this.decide(skill, true)} aria-label="Approve ${skill.name}">Approve</button>
          <button class="danger" @click=${() => void this.decide(skill, false)} aria-label="Reject ${skill.name}">Reject</button>` : nothing}</div></td>
      </tr>`)}</tbody></table></div>`;
  }

  protected override render() {
    const shown = this.shown;
    return html`${this.alerts()}
      ${this.drafts.length ? html`<section class="card" aria-labelledby="drafts-title">
        <h2 id="drafts-title">Written by agents, waiting for approval</h2>
        <p class="muted">Read a draft whole before approving it: once approved, agents whose skills name it may follow it.</p>
        ${this.table(this.drafts, true)}
      </section>` : nothing}
      <section class="card" aria-labelledby="skills-title">
        <h2 id="skills-title">Skills</h2>
        ${!this.skills ? html`<p class="muted">Loading…</p>` : this.skills.length === 0
          ? html`<p class="muted">No skill is installed: <code>gateway skills add &lt;folder|archive|git address&gt;</code></p>` : this.table(this.skills, false)}
      </section>
      ${shown ? html`<section class="card" aria-labelledby="shown-title" data-testid="skill-shown">
        <h2 id="shown-title">${shown.name} <span class="badge ${shown.status === 'draft' ? 'warn' : 'ok'}">${shown.status}</span></h2>
        <p>${visibleText(shown.description)}</p>
        <p class="muted">Used by: ${shown.agents.length ? shown.agents.join(', ') : html`no agent (<code>agents.&lt;id&gt;.skills</code>)`}</p>
        <ul class="plain">${shown.entries.map((entry) => html`<li><code>${visibleText(entry.path)}</code> <span class="muted">${entry.size} bytes${entry.executable ? ', executable' : ''}</span></li>`)}</ul>
        <pre class="wrap" data-testid="skill-instructions">${shown.instructions.split('\n').map((line) => visibleText(line)).join('\n')}</pre>
        <button class="secondary" @click=${() => { this.shown = undefined; }}>Close</button>
      </section>` : nothing}`;
  }
}
customElements.define('gw-skills', SkillsPage);
