/** Pairing: device requests and DM codes waiting for a decision, approved with one click; paired devices and approved senders, revoked here. */
import { html, nothing } from 'lit';
import { Page, when } from '../page.ts';
import type { AllowedSenderView, DevicePairingRequestView, DeviceView, DmPairingRequestView } from '../../shared/protocol/results.ts';

export class PairingPage extends Page {
  static override properties = { devices: { state: true }, pending: { state: true }, codes: { state: true }, senders: { state: true } };
  declare devices: DeviceView[] | undefined;
  declare pending: DevicePairingRequestView[];
  declare codes: DmPairingRequestView[];
  declare senders: AllowedSenderView[];

  constructor() {
    super();
    this.pending = [];
    this.codes = [];
    this.senders = [];
  }

  protected async load(): Promise<void> {
    for (const event of ['device.pair.requested', 'device.pair.resolved', 'channel.pair.requested', 'channel.pair.resolved', 'device.revoked']) {
      this.listen(event, () => void this.guard(() => this.refresh()));
    }
    await this.refresh();
  }

  private async refresh(): Promise<void> {
    const [devices, codes, senders] = await Promise.all([
      this.call<{ paired: DeviceView[]; pending: DevicePairingRequestView[] }>('devices.list'),
      this.call<{ requests: DmPairingRequestView[] }>('pair.list'),
      this.call<{ senders: AllowedSenderView[] }>('pair.allowed'),
    ]);
    this.devices = devices.paired;
    this.pending = devices.pending;
    this.codes = codes.requests;
    this.senders = senders.senders;
  }

  private act(method: string, params: Record<string, unknown>, done: string): void {
    void this.guard(async () => {
      await this.call(method, params);
      this.notice = done;
      await this.refresh();
    });
  }

  protected override render() {
    const self = this.gateway.state.kind === 'connected' ? this.gateway.state.hello.device.id : '';
    return html`${this.alerts()}
      <section class="card" aria-labelledby="codes-title">
        <h2 id="codes-title">Direct messages waiting</h2>
        ${this.codes.length === 0 ? html`<p class="muted">No pairing codes are waiting.</p>` : html`
        <ul class="items" data-testid="dm-codes">${this.codes.map((r) => html`<li>
          <span><strong class="code">${r.code}</strong> ${r.senderName ?? r.sender} <span class="muted">on ${r.channel}/${r.account}, expires ${when(r.expiresAt)}</span></span>
          <span class="row"><button @click=${() => this.act('pair.approve', { channel: r.channel, code: r.code, notify: true }, `Approved ${r.sender} on ${r.channel}.`)} aria-label="Approve ${r.code} from ${r.sender}">Approve</button>
          <button class="secondary" @click=${() => this.act('pair.reject', { channel: r.channel, code: r.code }, `Rejected ${r.code}.`)} aria-label="Reject ${r.code}">Reject</button></span>
        </li>`)}</ul>`}
      </section>
      <section class="card" aria-labelledby="requests-title">
        <h2 id="requests-title">Devices waiting</h2>
        ${this.pending.length === 0 ? html`<p class="muted">No devices are waiting.</p>` : html`
        <ul class="items">${this.pending.map((r) => html`<li>
          <span><strong class="code">${r.requestId}</strong> ${r.clientId ?? 'device'} <span class="muted">${r.role} from ${r.address ?? '?'}${r.viaProxy ? ' (via proxy)' : ''}, scopes ${r.scopes.join(', ') || 'none'}</span></span>
          <span class="row"><button @click=${() => this.act('devices.approve', { requestId: r.requestId }, `Approved device ${r.requestId}.`)} aria-label="Approve device ${r.requestId}">Approve</button>
          <button class="secondary" @click=${() => this.act('devices.reject', { requestId: r.requestId }, `Rejected ${r.requestId}.`)} aria-label="Reject device ${r.requestId}">Reject</button></span>
        </li>`)}</ul>`}
      </section>
      <section class="card" aria-labelledby="devices-title">
        <h2 id="devices-title">Paired devices</h2>
        ${!this.devices ? html`<p class="muted">Loading…</p>` : html`
        <div class="scroll"><table>
          <thead><tr><th scope="col">Device</th><th scope="col">Client</th><th scope="col">Role</th><th scope="col">Last seen</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
          <tbody>${this.devices.map((d) => html`<tr>
            <td><code title=${d.id}>${d.id.slice(0, 12)}…</code>${d.id === self ? html` <span class="badge">this browser</span>` : nothing}</td>
            <td>${d.clientId ?? '—'} <span class="muted">${d.platform ?? ''}</span></td><td>${d.role}</td><td>${when(d.lastSeenAt)} <span class="muted">${d.lastAddress ?? ''}</span></td>
            <td><button class="danger" @click=${() => { if (confirm('Revoke this device? Its connections close at once.')) this.act('devices.revoke', { deviceId: d.id }, 'Device revoked.'); }} aria-label="Revoke device ${d.id.slice(0, 12)}">Revoke</button></td>
          </tr>`)}</tbody></table></div>`}
      </section>
      <section class="card" aria-labelledby="senders-title">
        <h2 id="senders-title">Approved senders</h2>
        ${this.senders.length === 0 ? html`<p class="muted">No senders are approved.</p>` : html`
        <ul class="items">${this.senders.map((s) => html`<li>
          <span>${s.senderName ?? s.sender} <span class="muted">${s.channel}${s.account ? `/${s.account}` : ''}, since ${when(s.addedAt)}</span></span>
          <button class="danger" @click=${() => this.act('pair.revoke', { channel: s.channel, sender: s.sender }, `Revoked ${s.sender}.`)} aria-label="Revoke ${s.sender}">Revoke</button>
        </li>`)}</ul>`}
      </section>`;
  }
}
customElements.define('gw-pairing', PairingPage);
