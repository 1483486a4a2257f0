import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BIN, freePort, Home, ROOT } from '../support/cli.ts';
import { FakeSystemd } from '../support/fake-systemd.ts';

const available = (command: string) => spawnSync('sh', ['-c', `command -v ${command}`]).status === 0;

/** The shell blocks of the README's Uninstall section, as a user copies them. */
function uninstallBlocks(): string[] {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const section = /\n## Uninstall\n([\s\S]*?)\n## /.exec(readme)?.[1] ?? '';
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((match) => match[1]!);
}

describe('the README\'s Uninstall, run as written (e2e: a keychain profile, a profile under systemd, the recording fakes)', function () {
  let home: Home;
  let user: string;
  let systemd: FakeSystemd;
  beforeEach(async () => {
    user = mkdtempSync(join(tmpdir(), 'uninstall-user-'));
    systemd = new FakeSystemd();
    home = new Home({ HOME: user, XDG_CONFIG_HOME: join(user, '.config'), XDG_DATA_HOME: join(user, '.local/share'), ...systemd.env() });
  });
  afterEach(() => {
    home.cleanup();
    rmSync(user, { recursive: true, force: true });
    rmSync(systemd.dir, { recursive: true, force: true });
  });

  it('leaves no daemon, no unit, no keychain entry and no profile folder behind', async () => {
    const [profiles] = uninstallBlocks();
    expect(profiles, 'the README has an Uninstall section with its commands').to.be.a('string').and.include('gateway service uninstall');
    const keychain = available('dbus-run-session') && available('gnome-keyring-daemon') && available('secret-tool');
    const ports = [await freePort(), await freePort()];
    const script = join(user, 'steps.sh');
    // The profiles as a user has them: default in the keychain (where one is reachable), staging a user unit of systemd.
    writeFileSync(script, `set -u
gateway() { node ${BIN} "$@"; }
${keychain ? 'printf "keyring-pw" | gnome-keyring-daemon --replace --unlock --components=secrets >/dev/null 2>&1' : ''}
gateway profiles create default --secrets ${keychain ? 'keychain' : 'file'} --port ${ports[0]} >/dev/null || exit 11
gateway start >/dev/null || exit 12
gateway profiles create staging --secrets file --port ${ports[1]} >/dev/null || exit 13
gateway service install --profile staging >/dev/null 2>&1 || exit 14
service="$(gateway secrets list --json | node -e 'let t = ""; process.stdin.on("data", (c) => { t += c; }).on("end", () => console.log(/"(.*)"/.exec(JSON.parse(t).location)?.[1] ?? ""))')"
${keychain ? 'secret-tool search --all service "$service" 2>&1 | grep -c "^attribute.username" > "$HOME/before.txt"' : ''}
gateway profiles --json > "$HOME/profiles.json"
# The README's block, as written:
${profiles}
echo "block=$?"
${keychain ? 'secret-tool search --all service "$service" 2>&1 | grep -c "^attribute.username" > "$HOME/after.txt"' : ''}
true
`);
    const run = spawnSync(keychain ? 'dbus-run-session' : 'bash', keychain ? ['--', 'bash', script] : [script], {
      env: { ...process.env, ...home.env, CI: 'true' } as NodeJS.ProcessEnv, encoding: 'utf8', timeout: 120_000,
    });
    expect(run.status, run.stdout + run.stderr).to.equal(0);
    expect(run.stdout).to.include('block=0');
    const before = JSON.parse(readFileSync(join(user, 'profiles.json'), 'utf8')).profiles as { name: string; state: string; pid: number }[];
    expect(before.map((profile) => [profile.name, profile.state])).to.deep.equal([['default', 'running'], ['staging', 'running']]);

    expect(existsSync(home.dir), 'every profile\'s folder').to.equal(false);
    expect(readdirSync(join(user, '.config/systemd/user')), 'the unit').to.deep.equal([]);
    expect(systemd.calls().map((call) => call.slice(1, 4).join(' '))).to.include('--user disable --now');
    for (const { pid } of before) expect(existsSync(`/proc/${pid}`) && !readFileSync(`/proc/${pid}/stat`, 'utf8').includes(') Z '), `pid ${pid} gone`).to.equal(false);
    for (const port of ports) await fetch(`http://127.0.0.1:${port}/healthz`).then(() => expect.fail(`port ${port} still answers`), () => undefined);
    if (keychain) {
      expect(Number(readFileSync(join(user, 'before.txt'), 'utf8')), 'entries in the keychain before').to.be.above(0);
      expect(Number(readFileSync(join(user, 'after.txt'), 'utf8')), 'and after').to.equal(0);
    }
  });
});
