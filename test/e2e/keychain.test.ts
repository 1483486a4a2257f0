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
    expect(readFileSync(home.file('profile.json'), 'utf8')).to.include('"keychain"').and.not.include('hunter2');
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

  it('over SSH without a session: names the way out, moves a profile to its file for good, abandons on request, removes with --force', async () => {
    const noBus = { DBUS_SESSION_BUS_ADDRESS: undefined };
    const made = inKeyringSession(home, `
      G profiles create default --secrets keychain >/dev/null; echo "create=$?"
      G start >/dev/null; echo "start=$?"
      printf 'hooks-value' | G secrets set hooks.token >/dev/null; echo "set=$?"
      G stop >/dev/null; echo "stop=$?"
      G profiles create third --secrets keychain >/dev/null; G profiles create gone --secrets keychain >/dev/null; echo "more=$?"
    `);
    for (const step of ['create=0', 'start=0', 'set=0', 'stop=0', 'more=0']) expect(made.stdout, made.stderr).to.include(step);

    // Without a session bus: a clear error, whose hint is the command that works here.
    const start = await home.run(['start', '--json'], { env: noBus });
    expect(start.code).to.equal(1);
    expect(start.json.error.hints.join('\n')).to.include('gateway secrets move file --profile default');
    const blind = await home.run(['secrets', 'move', 'file', '--json'], { env: noBus });
    expect(blind.code).to.equal(1);
    expect(blind.json.error.message).to.include('nothing was moved');
    expect(blind.json.error.hints.join('\n')).to.include('dbus-run-session').and.include('--abandon');
    expect(existsSync(home.file('secrets.json'))).to.equal(false);
    expect(JSON.parse(readFileSync(home.file('profile.json'), 'utf8')).secrets).to.equal('keychain');

    // Inside a session the move keeps every secret; afterwards the profile runs without any keychain, same token.
    const moved = inKeyringSession(home, 'G secrets move file --json > "$GATEWAY_HOME/move.json"; echo "move=$?"; G secrets move file --json > /dev/null; echo "again=$?"');
    expect(moved.stdout, moved.stderr).to.include('move=0');
    expect(moved.stdout).to.include('again=0');
    const result = JSON.parse(readFileSync(join(home.dir, 'move.json'), 'utf8'));
    expect(result).to.include({ from: 'keychain', to: 'file', oldStoreCleared: true });
    expect(result.moved).to.include.members(['gateway.token', 'hooks.token']);
    expect(home.secrets()['hooks.token']).to.equal('hooks-value');
    const token = home.token();
    const after = await home.run(['start', '--json'], { env: noBus });
    expect(after.code, after.stderr).to.equal(0);
    expect(home.token()).to.equal(token);
    const status = await home.run(['status', '--json'], { env: noBus });
    expect(status.json).to.include({ state: 'running', secretStore: 'file' });
    expect(status.json.rpc.ok).to.equal(true);
    await home.run(['stop'], { env: noBus });

    // --abandon: a fresh start in the file store, the keychain's secrets left behind and said so.
    const abandoned = await home.run(['secrets', 'move', 'file', '--abandon', '--profile', 'third', '--json'], { env: noBus });
    expect(abandoned.code, abandoned.stderr).to.equal(0);
    expect(abandoned.json).to.include({ from: 'keychain', to: 'file', abandoned: null, oldStoreCleared: false });
    expect(abandoned.stderr).to.include('left behind');
    const third = await home.run(['start', '--profile', 'third'], { env: noBus });
    expect(third.code, third.stderr).to.equal(0);
    await home.run(['stop', '--profile', 'third'], { env: noBus });

    // Removing a keychain profile without the keychain: refused, then done with --force, saying what was left.
    const refused = await home.run(['profiles', 'remove', 'gone', '--yes', '--json'], { env: noBus });
    expect(refused.code).to.equal(1);
    expect(existsSync(home.profileDir('gone'))).to.equal(true);
    const forced = await home.run(['profiles', 'remove', 'gone', '--yes', '--force', '--json'], { env: noBus });
    expect(forced.code, forced.stderr).to.equal(0);
    expect(forced.json.left[0].what).to.include('OS keychain');
    expect(existsSync(home.profileDir('gone'))).to.equal(false);
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
