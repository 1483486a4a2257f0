import { Flags } from '@oclif/core';
import { BaseCommand } from '../cli/base-command.ts';
import { openBrowser, sshForward } from '../cli/browser.ts';
import { GatewayError } from '../shared/errors.ts';

export interface DashboardResult {
  url: string;
  /** A one-time code that lets a new browser in (only with --invite). */
  invite?: { code: string; expiresAt: string };
}

/** How long a dashboard invite lets a new browser in. */
const INVITE_TTL_MS = 10 * 60_000;

export default class Dashboard extends BaseCommand<DashboardResult> {
  static override summary = 'Print the URL of the profile\'s Control UI (and open it on a desktop).';
  static override description = 'A browser is a device like the CLI: the first time, it signs in with the gateway token or a one-time invite code, '
    + 'which this command prints (--no-invite leaves it out; under --json only --invite adds it). A browser is opened only on a desktop '
    + 'session; over SSH the command prints the `ssh -L` line that brings the UI to the computer with the browser.';
  static override examples = ['<%= config.bin %> dashboard', '<%= config.bin %> dashboard --json', '<%= config.bin %> dashboard --no-browser --no-invite'];
  static override flags = {
    browser: Flags.boolean({ description: 'open the URL in a browser on a desktop session', default: true, allowNo: true }),
    invite: Flags.boolean({ description: 'print a one-time code (10 minutes) that signs a new browser in', allowNo: true }),
  };

  async run(): Promise<DashboardResult> {
    const { flags } = await this.parse(Dashboard);
    const client = await this.rpc(this.selectProfile(flags.profile));
    const [status, ui] = await Promise.all([
      client.call('status', {}),
      client.call('config.get', { key: 'gateway.controlUi' }),
    ]);
    const settings = (ui as { value: { enabled: boolean; basePath: string } }).value;
    if (!settings.enabled) {
      throw new GatewayError('The Control UI is turned off for this profile.', { hints: ['gateway config set gateway.controlUi.enabled true', 'gateway restart'] });
    }
    const origin = new URL(status.url);
    // A daemon listening on every address is reached here on loopback.
    if (origin.hostname === '0.0.0.0' || origin.hostname === '[::]') origin.hostname = '127.0.0.1';
    const base = settings.basePath.endsWith('/') ? settings.basePath : `${settings.basePath}/`;
    const url = new URL(base, origin).toString();
    const result: DashboardResult = { url };
    if (flags.invite ?? !this.jsonEnabled()) {
      const scopes = ['operator.read', 'operator.write', 'operator.pairing', 'operator.admin'] as const;
      const invite = await client.call('devices.invite', { role: 'operator', scopes: [...scopes], ttlMs: INVITE_TTL_MS });
      result.invite = invite;
    }
    this.say(url);
    if (result.invite) this.say(`\nA browser new to this gateway signs in with the one-time code ${result.invite.code} (valid 10 minutes, once).`);
    const forward = sshForward(url);
    if (forward) this.say(`\nThe UI listens on this host only. From the computer with the browser, forward it first, then open the URL there:\n\n  ${forward}`);
    if (flags.browser) openBrowser(url);
    return result;
  }
}
