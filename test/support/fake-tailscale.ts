/**
 * A recording stand-in for the tailscale CLI (the real one needs the
 * Tailscale service and an account): status, serve, funnel and whois as the
 * gateway calls them, with the backend state, failures and the tailnet's
 * users set by the test.
 */
import { chmodSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const SCRIPT = String.raw`
const fs = require('node:fs');
const path = require('node:path');
const dir = process.env.FAKE_TAILSCALE_DIR;
const args = process.argv.slice(2);
fs.appendFileSync(path.join(dir, 'calls'), JSON.stringify(args) + '\n');
const settings = JSON.parse(fs.readFileSync(path.join(dir, 'settings.json'), 'utf8'));
const [verb] = args;
if (settings.fail === verb) { process.stderr.write(verb + ': refused by the fake\n'); process.exit(1); }
if (verb === 'status') {
  process.stdout.write(JSON.stringify({ BackendState: settings.backend, Self: settings.backend === 'Running' ? { DNSName: 'gw-host.tail1234.ts.net.', TailscaleIPs: ['100.100.1.1'] } : null }));
} else if (verb === 'whois') {
  const login = settings.users[args[2]];
  if (!login) { process.stderr.write('no such peer\n'); process.exit(1); }
  process.stdout.write(JSON.stringify({ Node: { Name: 'peer' }, UserProfile: { LoginName: login, DisplayName: login } }));
} else if (verb !== 'serve' && verb !== 'funnel') {
  process.stderr.write('fake tailscale: ' + verb + ' is not scripted\n'); process.exit(1);
}
`;

export interface TailscaleSettings {
  backend: 'Running' | 'NeedsLogin' | 'Stopped';
  /** A verb that fails. */
  fail?: string;
  /** Tailnet addresses and their users' logins. */
  users: Record<string, string>;
}

export class FakeTailscale {
  readonly dir = mkdtempSync(join(tmpdir(), 'gateway-tailscale-'));

  constructor(settings: TailscaleSettings = { backend: 'Running', users: {} }) {
    const bin = join(this.dir, 'tailscale');
    writeFileSync(bin, `#!${process.execPath}\n${SCRIPT}`);
    chmodSync(bin, 0o755);
    this.set(settings);
  }

  set(settings: TailscaleSettings): void {
    writeFileSync(join(this.dir, 'settings.json'), JSON.stringify(settings));
  }

  env(): Record<string, string> {
    return { PATH: `${this.dir}:${process.env.PATH}`, FAKE_TAILSCALE_DIR: this.dir };
  }

  calls(): string[][] {
    const file = join(this.dir, 'calls');
    return existsSync(file) ? readFileSync(file, 'utf8').trim().split('\n').filter(Boolean).map((line) => JSON.parse(line)) : [];
  }
}
