/**
 * Config: a form generated from the configuration's JSON Schema, and a raw
 * JSON mode. All changes are checked together by the gateway and written at
 * once, or not at all; each refused value is shown beside its field. After
 * saving, the page says whether the change applied, needs a reload or a restart.
 */
import { html, nothing, type TemplateResult } from 'lit';
import { Page } from '../page.ts';
import type { ConfigPatchResult } from '../../shared/protocol/results.ts';

interface Node {
  type?: string; description?: string; default?: unknown; enum?: readonly unknown[]; minimum?: number; maximum?: number;
  items?: Node; properties?: Record<string, Node>; additionalProperties?: boolean | Node; anyOf?: Node[];
}
interface Change { key: string; value?: unknown; unset?: boolean }

const get = (source: unknown, key: string): unknown => key.split('.').reduce<unknown>((node, part) => (node && typeof node === 'object' ? (node as Record<string, unknown>)[part] : undefined), source);
const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);
const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

/** The leaf changes that turn one document into another (arrays and free-form maps are leaves). */
export function diff(before: unknown, after: unknown, prefix = ''): Change[] {
  const changes: Change[] = [];
  const keys = new Set([...Object.keys(isObject(before) ? before : {}), ...Object.keys(isObject(after) ? after : {})]);
  for (const name of keys) {
    const key = prefix ? `${prefix}.${name}` : name;
    const b = isObject(before) ? before[name] : undefined;
    const a = isObject(after) ? after[name] : undefined;
    if (a === undefined) changes.push({ key, unset: true });
    else if (isObject(a) && isObject(b)) changes.push(...diff(b, a, key));
    else if (!same(a, b)) changes.push({ key, value: a });
  }
  return changes;
}

export class ConfigPage extends Page {
  static override properties = { schema: { state: true }, effective: { state: true }, raw: { state: true }, mode: { state: true }, problems: { state: true }, outcome: { state: true } };
  declare schema: Node | undefined;
  declare effective: Record<string, unknown>;
  declare raw: Record<string, unknown>;
  declare mode: 'form' | 'json';
  declare problems: Record<string, string>;
  declare outcome: ConfigPatchResult | undefined;
  private readOnly = new Set<string>();

  constructor() {
    super();
    this.mode = 'form';
    this.problems = {};
    this.effective = {};
    this.raw = {};
  }

  protected async load(): Promise<void> {
    const [schema, config] = await Promise.all([
      this.call<{ schema: Node; readOnlyKeys: string[] }>('config.schema'),
      this.call<{ config: Record<string, unknown>; set: Record<string, unknown> }>('config.get'),
    ]);
    this.schema = schema.schema;
    this.readOnly = new Set(schema.readOnlyKeys);
    this.effective = config.config;
    this.raw = config.set;
  }

  /** The form's values that differ from what is in force, read and checked field by field. */
  private formChanges(form: HTMLFormElement): Change[] | undefined {
    const problems: Record<string, string> = {};
    const changes: Change[] = [];
    for (const element of Array.from(form.querySelectorAll<HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement>('[data-key]'))) {
      if (element.disabled) continue;
      const key = element.dataset.key!;
      const kind = element.dataset.kind!;
      const current = get(this.effective, key);
      let value: unknown;
      if (kind === 'boolean') {
        value = (element as HTMLInputElement).checked;
        if (current === undefined && value === false) continue;
      }
      else if (kind === 'integer' || kind === 'number') {
        if (element.value.trim() === '') {
          if (current !== undefined && get(this.raw, key) !== undefined) changes.push({ key, unset: true });
          continue;
        }
        value = Number(element.value);
        if (!Number.isFinite(value) || (kind === 'integer' && !Number.isInteger(value))) {
          problems[key] = `${key}: must be ${kind === 'integer' ? 'a whole number' : 'a number'}`;
          continue;
        }
      } else if (kind === 'lines') {
        value = element.value.split('\n').map((line) => line.trim()).filter(Boolean);
        // An empty list where nothing is set (a channel not configured) is no change.
        if (current === undefined && (value as string[]).length === 0) continue;
      }
      else if (kind === 'json') {
        try {
          value = element.value.trim() === '' ? undefined : JSON.parse(element.value);
        } catch {
          problems[key] = `${key}: is not valid JSON`;
          continue;
        }
        if (value === undefined) {
          if (get(this.raw, key) !== undefined) changes.push({ key, unset: true });
          continue;
        }
      } else {
        if (element.value === '' && current === undefined) continue;
        value = element.value;
      }
      if (!same(value, current)) changes.push({ key, value });
    }
    this.problems = problems;
    return Object.keys(problems).length ? undefined : changes;
  }

  private async save(event: SubmitEvent): Promise<void> {
    event.preventDefault();
    this.notice = undefined;
    this.outcome = undefined;
    let changes: Change[] | undefined;
    if (this.mode === 'json') {
      const text = (this.querySelector<HTMLTextAreaElement>('#config-json')!).value;
      try {
        const document = JSON.parse(text) as unknown;
        if (!isObject(document)) throw new Error('not an object');
        changes = diff(this.raw, document);
        this.problems = {};
      } catch (error) {
        this.problems = { '': `The document is not a JSON object: ${error instanceof Error ? error.message : String(error)}` };
        return;
      }
    } else {
      changes = this.formChanges(event.target as HTMLFormElement);
    }
    if (!changes) return;
    if (changes.length === 0) {
      this.notice = 'Nothing changed.';
      return;
    }
    try {
      this.error = undefined;
      this.outcome = await this.call<ConfigPatchResult>('config.patch', { changes });
      this.problems = {};
      await this.load();
    } catch (error) {
      const details = (error as { details?: { problems?: { key: string; message: string }[] } }).details;
      const problems: Record<string, string> = {};
      for (const problem of details?.problems ?? []) problems[problem.key] = problem.message;
      this.problems = problems;
      this.error = `Nothing was written. ${error instanceof Error ? error.message : String(error)}`;
    }
  }

  private async reload(): Promise<void> {
    await this.guard(async () => {
      const result = await this.call<{ ok: boolean; config: { ok: boolean; error?: string } }>('reload');
      this.notice = result.ok ? 'Reloaded: the change applies now.' : `The reload failed: ${result.config.error ?? 'see the log'}`;
      this.outcome = undefined;
    });
  }

  /** The daemon hands its restart to its supervisor; this page reconnects by itself when the new one is up. */
  private async restart(): Promise<void> {
    await this.guard(async () => {
      const result = await this.call<{ via: string }>('restart');
      this.outcome = undefined;
      this.notice = `Restarting (${result.via}); this page reconnects when the daemon is back.`;
    });
  }

  protected override render() {
    if (!this.schema) return html`${this.alerts()}<p class="muted">Loading…</p>`;
    const admin = this.gateway.has('operator.admin');
    return html`${this.alerts()}
      ${this.outcome ? this.describeOutcome(this.outcome) : nothing}
      <div class="tabs" role="group" aria-label="Editing mode">
        <button type="button" aria-pressed=${this.mode === 'form' ? 'true' : 'false'} @click=${() => { this.mode = 'form'; this.problems = {}; }}>Form</button>
        <button type="button" aria-pressed=${this.mode === 'json' ? 'true' : 'false'} @click=${() => { this.mode = 'json'; this.problems = {}; }}>Raw JSON</button>
      </div>
      <form class="config" novalidate @submit=${(e: SubmitEvent) => void this.save(e)}>
        ${this.mode === 'json' ? html`
          <label for="config-json">config.json (the keys set; everything else has its default)</label>
          <textarea id="config-json" class="code" rows="24" spellcheck="false" aria-invalid=${this.problems[''] ? 'true' : 'false'} aria-describedby="config-json-problem"
            .value=${JSON.stringify(this.raw, null, 2)}></textarea>
          ${this.problems[''] ? html`<p class="problem" id="config-json-problem">${this.problems['']}</p>` : nothing}
          ${Object.entries(this.problems).filter(([key]) => key).map(([, message]) => html`<p class="problem">${message}</p>`)}`
        : this.fields(this.schema, '')}
        ${admin ? html`<div class="row sticky"><button type="submit">Save</button></div>` : html`<p class="muted">Changing the configuration needs the admin scope.</p>`}
      </form>`;
  }

  private describeOutcome(outcome: ConfigPatchResult): TemplateResult {
    const keys = outcome.changes.map((c) => c.key).join(', ');
    if (outcome.restartRequired) {
      return html`<div class="alert notice" role="status" data-testid="config-outcome">Saved ${keys}. The change needs a restart of the daemon
        (<code>gateway restart</code> on the gateway host). <button @click=${() => void this.restart()}>Restart now</button></div>`;
    }
    if (outcome.reloadRequired) {
      return html`<div class="alert notice" role="status" data-testid="config-outcome">Saved ${keys}. The change applies at the next reload.
        <button @click=${() => void this.reload()}>Reload now</button></div>`;
    }
    return html`<div class="alert notice" role="status" data-testid="config-outcome">Saved ${keys}. Applied.</div>`;
  }

  private fields(node: Node, prefix: string): TemplateResult {
    return html`${Object.entries(node.properties ?? {}).map(([name, child]) => {
      const key = prefix ? `${prefix}.${name}` : name;
      if (child.type === 'object' && child.properties && !prefix) {
        // Top-level sections fold, opened where a problem is, so the page stays short.
        const open = Object.keys(this.problems).some((problem) => problem === key || problem.startsWith(`${key}.`));
        return html`<details class="section" ?open=${open}><summary>${name}</summary>${child.description ? html`<p class="hint">${child.description}</p>` : nothing}${this.fields(child, key)}</details>`;
      }
      if (child.type === 'object' && child.properties) {
        return html`<fieldset><legend>${name}</legend>${child.description ? html`<p class="hint">${child.description}</p>` : nothing}${this.fields(child, key)}</fieldset>`;
      }
      return this.field(key, name, child);
    })}`;
  }

  private field(key: string, name: string, node: Node): TemplateResult {
    const id = `cfg-${key.replace(/[^A-Za-z0-9_-]/g, '-')}`;
    const value = get(this.effective, key);
    const problem = this.problems[key];
    const readOnly = this.readOnly.has(key);
    const described = `${id}-hint${problem ? ` ${id}-problem` : ''}`;
    const hint = html`<p class="hint" id="${id}-hint">${node.description ?? ''}${get(this.raw, key) === undefined ? html` <span class="muted">(default)</span>` : nothing}</p>
      ${problem ? html`<p class="problem" id="${id}-problem" role="alert">${problem}</p>` : nothing}`;
    const invalid = problem ? 'true' : 'false';
    let control: TemplateResult;
    if (node.type === 'boolean') {
      return html`<div class="field"><label class="check"><input id=${id} type="checkbox" data-key=${key} data-kind="boolean" ?disabled=${readOnly}
        .checked=${value === true} aria-invalid=${invalid} aria-describedby=${described}> ${name}</label>${hint}</div>`;
    }
    if (node.enum) {
      control = html`<select id=${id} data-key=${key} data-kind="string" ?disabled=${readOnly} aria-invalid=${invalid} aria-describedby=${described}>
        ${value === undefined ? html`<option value="" selected>(not set)</option>` : nothing}
        ${node.enum.map((option) => html`<option value=${String(option)} ?selected=${option === value}>${String(option)}</option>`)}</select>`;
    } else if (node.type === 'integer' || node.type === 'number') {
      control = html`<input id=${id} type="text" inputmode="numeric" data-key=${key} data-kind=${node.type} ?disabled=${readOnly}
        .value=${value === undefined || value === null ? '' : String(value)} aria-invalid=${invalid} aria-describedby=${described}>`;
    } else if (node.type === 'string') {
      control = html`<input id=${id} type="text" data-key=${key} data-kind="string" ?disabled=${readOnly} .value=${value === undefined || value === null ? '' : String(value)}
        aria-invalid=${invalid} aria-describedby=${described}>`;
    } else if (node.type === 'array' && node.items?.type === 'string') {
      control = html`<textarea id=${id} rows="3" data-key=${key} data-kind="lines" ?disabled=${readOnly} aria-invalid=${invalid} aria-describedby=${described}
        .value=${Array.isArray(value) ? value.join('\n') : ''}></textarea>`;
    } else {
      control = html`<textarea id=${id} class="code" rows="4" data-key=${key} data-kind="json" ?disabled=${readOnly} spellcheck="false" aria-invalid=${invalid} aria-describedby=${described}
        .value=${value === undefined ? '' : JSON.stringify(value, null, 2)}></textarea>`;
    }
    return html`<div class="field"><label for=${id}>${name}</label>${control}${hint}</div>`;
  }
}
customElements.define('gw-config', ConfigPage);
