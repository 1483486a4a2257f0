import { Flags } from '@oclif/core';
import { BaseCommand } from '../cli/base-command.ts';
import { openBrowser, sshForward } from '../cli/browser.ts';
import { GatewayError } from '../shared/errors.ts';

export interface DashboardResult {
  url: string;
  /** A one-time code that signs a new browser in, and the link that carries it (by default; under --json only with --invite). */
  invite?: { code: string; expiresAt: string; url: string };
}

/** How long a dashboard invite lets a new browser in. */
const INVITE_TTL_MS = 10 * 60_000;

export default class Dashboard extends BaseCommand<DashboardResult> {
  static override summary = 'Open the profile\'s Control UI signed in (over SSH: print the link and the tunnel to it).';
  static override description = 'A browser is a device like the CLI. The link this command opens or prints carries a one-time code in its '
    + 'fragment (#invite=...): a browser new to the gateway signs in with it, once, within 10 minutes; the page takes it out of the address '
    + 'at once, and a fragment never reaches a server log. --no-invite prints the bare URL (the page then asks for the gateway token or a '
    + 'code); under --json only --invite adds the code. A browser is opened only on a desktop session; over SSH the command prints the '
    + '`ssh -L` line that brings the UI to the computer with the browser, then the link to open there.';
  static override examples = ['<%= config.bin %> dashboard', '<%= config.bin %> dashboard --json --invite', '<%= config.bin %> dashboard --no-browser --no-invite'];
  static override flags = {
    browser: Flags.boolean({ description: 'open the link in a browser on a desktop session', default: true, allowNo: true }),
    invite: Flags.boolean({ description: 'put a one-time sign-in code (10 minutes) in the link', allowNo: true }),
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
      result.invite = { ...invite, url: `${url}#invite=${encodeURIComponent(invite.code)}` };
    }
    const link = result.invite?.url ?? url;
    const forward = sshForward(url);
    if (forward) {
      this.say(`The UI listens on this host only. On the computer with the browser, forward it first:\n\n  ${forward}\n\nthen open:\n`);
    }
    this.say(link);
    if (result.invite) this.say(`\nThe link signs a browser new to this gateway in, once, within 10 minutes (one-time code ${result.invite.code}).`);
    if (flags.browser && openBrowser(link)) this.say('\nOpened it in the browser.');
    return result;
  }
}
