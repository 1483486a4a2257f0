import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { BIN, freePort, Home } from '../support/cli.ts';

const available = (command: string) => spawnSync('sh', ['-c', `command -v ${command}`]).status === 0;

/**
 * Runs a shell script inside its own D-Bus session with a real gnome-keyring,
 * as a desktop user would have; the script stops its daemons before the
 * session ends.
 */
function inKeyringSession(home: Home, script: string, unlock = true) {
  const data = join(home.dir, 'xdg-data');
  mkdirSync(data, { recursive: true });
  const prelude = unlock ? 'printf "keyring-pw" | gnome-keyring-daemon --replace --unlock --components=secrets >/dev/null 2>&1\n' : '';
  return spawnSync('dbus-run-session', ['--', 'bash', '-c', `set -u\nG() { node ${BIN} "$@"; }\n${prelude}${script}`], {
    env: { ...process.env, ...home.env, HOME: home.dir, XDG_DATA_HOME: data, CI: 'true' } as NodeJS.ProcessEnv,
    encoding: 'utf8',
    timeout: 60_000,
  });
}

describe('OS keychain secret store (e2e, real gnome-keyring)', function () {
  let home: Home;
  before(function () {
    if (!available('dbus-run-session') || !available('gnome-keyring-daemon')) {
      if (process.env.CI) throw new Error('dbus-run-session and gnome-keyring-daemon are required (Debian: dbus, gnome-keyring)');
      this.skip();
    }
  });
  beforeEach(async () => { home = new Home({ GATEWAY_PORT: String(await freePort()) }); });
  afterEach(() => home.cleanup());

  it('keeps the gateway token and secrets in the keychain, never in files', () => {
    const run = inKeyringSession(home, `
      G start --json > "$GATEWAY_HOME/start.json"; echo "start=$?"
      G status --json > "$GATEWAY_HOME/status.json"; echo "status=$?"
      printf 'hunter2-value\\n' | G secrets set gateway.password --json > "$GATEWAY_HOME/set.json"; echo "set=$?"
      G secrets list --json > "$GATEWAY_HOME/list.json"; echo "list=$?"
      secret-tool search --all service "$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1])).location.match(/"(.*)"/)[1])' "$GATEWAY_HOME/list.json")" 2>&1 | grep -c '^attribute.username' > "$GATEWAY_HOME/count.txt"
      G stop; echo "stop=$?"
      G profiles create other --secrets keychain --json > "$GATEWAY_HOME/other.json"; echo "create=$?"
      printf 'x' | G secrets set hooks.token --profile other >/dev/null; G profiles remove other --yes --json > "$GATEWAY_HOME/remove.json"; echo "remove=$?"
    `);
    expect(run.stdout, run.stderr).to.include('start=0');
    for (const step of ['status=0', 'set=0', 'list=0', 'stop=0', 'create=0', 'remove=0']) expect(run.stdout, run.stderr).to.include(step);
    const status = JSON.parse(readFileSync(join(home.dir, 'status.json'), 'utf8'));
    expect(status).to.include({ state: 'running', secretStore: 'keychain' });
    expect(status.rpc.ok).to.equal(true);
    const list = JSON.parse(readFileSync(join(home.dir, 'list.json'), 'utf8'));
    expect(list.backend).to.equal('keychain');
    expect(list.secrets.map((s: { name: string }) => s.name)).to.deep.equal(['gateway.password', 'gateway.token']);
    // gateway.token, gateway.password, and this CLI's device key and device token
    expect(Number(readFileSync(join(home.dir, 'count.txt'), 'utf8'))).to.equal(4);
    expect(existsSync(home.file('secrets.json'))).to.equal(false);
    expect(readFileSync(home.file('config.json'), 'utf8')).to.include('"keychain"').and.not.include('hunter2');
    expect(readFileSync(home.file('gateway.log'), 'utf8')).to.not.include('hunter2');
    expect(JSON.parse(readFileSync(join(home.dir, 'remove.json'), 'utf8'))).to.include({ removed: true, secretsRemoved: 1 });
  });

  it('reports a keychain that is reachable but refuses, naming the fix, instead of falling back', () => {
    const run = inKeyringSession(home, 'gnome-keyring-daemon --start --components=secrets >/dev/null 2>&1\nG start --json; echo "start=$?"', false);
    expect(run.stdout).to.include('start=1');
    const json = JSON.parse(run.stdout.slice(0, run.stdout.lastIndexOf('start=')));
    expect(json.error.message).to.include('OS keychain refused');
    expect(json.error.hints.join(' ')).to.include('unlock');
    expect(existsSync(home.file('secrets.json'))).to.equal(false);
  });

  it('falls back to the 0600 file, with one warning, when there is no session bus', async () => {
    const first = await home.run(['start'], { env: { DBUS_SESSION_BUS_ADDRESS: undefined } });
    expect(first.code).to.equal(0);
    expect(first.stderr.match(/No OS keychain is reachable/g)).to.have.length(1);
    const second = await home.run(['status', '--json'], { env: { DBUS_SESSION_BUS_ADDRESS: undefined } });
    expect(second.json.secretStore).to.equal('file');
    expect(second.stderr).to.not.include('keychain');
  });

  it('never switches a keychain profile to the file silently when the keychain is gone', async () => {
    const made = inKeyringSession(home, 'G profiles create kc --secrets keychain >/dev/null; echo "create=$?"');
    expect(made.stdout).to.include('create=0');
    const result = await home.run(['secrets', 'set', 'hooks.token', '--profile', 'kc', '--json'], { input: 'x', env: { DBUS_SESSION_BUS_ADDRESS: undefined } });
    expect(result.code).to.equal(1);
    expect(result.json.error.message).to.include('OS keychain, which is not reachable');
    expect(existsSync(home.file('secrets.json', 'kc'))).to.equal(false);
  });
});
