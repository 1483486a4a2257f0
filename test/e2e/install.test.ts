import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { freePort, ROOT } from '../support/cli.ts';

/** A user's clone of the project: its files, without what a build or an install makes. */
function cloneCopy(into: string): string {
  const skip = new Set(['node_modules', 'dist', '.git', 'coverage', 'test-output', 'oclif.manifest.json']);
  cpSync(ROOT, into, { recursive: true, filter: (source) => !skip.has(basename(source)) });
  return into;
}

/** Whether this process may make a mount namespace (root on Linux), to install into /usr/local without touching the host's. */
function mountNamespaces(): boolean {
  return process.getuid?.() === 0 && spawnSync('unshare', ['--mount', 'true']).status === 0;
}

const ROOT_LOGIN_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

describe('scripts/install.sh: the quick start (e2e, a real npm build and install)', function () {
  // Two real npm builds and installs: minutes on a busy host with two cores.
  this.timeout(1_200_000);
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'install-'));
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('installs a packed copy the clone can lose, puts gateway on the PATH as written, starts the daemon, and an upgrade restarts the daemon of every running profile on the new copy', async () => {
    const isolated = mountNamespaces();
    // As root the gateway goes into /usr/local (here a file system of this test's own, mounted over it in a namespace).
    const prefix = isolated ? '/usr/local' : join(dir, 'prefix');
    const first = cloneCopy(join(dir, 'clone-1'));
    const second = cloneCopy(join(dir, 'clone-2'));
    const out = join(dir, 'out');
    mkdirSync(out);
    const script = join(dir, 'steps.sh');
    writeFileSync(script, `set -u
${isolated ? 'mount -t tmpfs gateway-install-test /usr/local || exit 90' : ''}
step() { local name=$1; shift; "$@" >"$OUT/$name.out" 2>"$OUT/$name.err"; echo $? >"$OUT/$name.code"; }
step install-1 bash "$FIRST/scripts/install.sh"
cp "${prefix}/bin/gateway" "$OUT/launcher"
# The README's next line, in a shell with the user's own PATH.
step status-1 env PATH="$USER_PATH" gateway status --json
# The clone goes (or npm ci and the tests rebuild it): the installed gateway goes on.
rm -rf "$FIRST"
step help env PATH="$USER_PATH" gateway --help
# A second profile runs too (on a port of its own), and a third is stopped.
step start-staging env PATH="$USER_PATH" gateway --profile staging start --port "$STAGING_PORT"
step staging-1 env PATH="$USER_PATH" gateway --profile staging status --json
step create-idle env PATH="$USER_PATH" gateway profiles create idle --secrets file
step install-2 bash "$SECOND/scripts/install.sh"
step status-2 env PATH="$USER_PATH" gateway status --json
step staging-2 env PATH="$USER_PATH" gateway --profile staging status --json
step idle-2 env PATH="$USER_PATH" gateway --profile idle status --json
step stop-staging env PATH="$USER_PATH" gateway --profile staging stop
ls -a "${prefix}/lib" >"$OUT/lib"
ls "${prefix}/lib/gateway/node_modules" >"$OUT/modules"
step stop env PATH="$USER_PATH" gateway stop
# The README's Uninstall: the program, from where the installer put it.
step uninstall bash -c "$UNINSTALL_PROGRAM"
ls -a "${prefix}/lib" >"$OUT/lib-after"
ls -a "${prefix}/bin" >"$OUT/bin-after"
`);
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const removeProgram = [...(/\n## Uninstall\n([\s\S]*?)\n## /.exec(readme)?.[1] ?? '').matchAll(/```sh\n([\s\S]*?)```/g)].map((match) => match[1]!)[1] ?? '';
    expect(removeProgram, 'the README says how to remove the program').to.match(/^prefix=~\/\.local$/m);
    const nodeDir = dirname(process.execPath);
    const userPath = isolated ? ROOT_LOGIN_PATH : `${join(prefix, 'bin')}:/usr/bin:/bin`;
    const env = {
      ...process.env,
      // The installer runs where the user's shell does: Node and npm on the PATH, the profile in the user's home.
      PATH: isolated ? `${nodeDir}:${ROOT_LOGIN_PATH}` : `${nodeDir}:/usr/bin:/bin`,
      USER_PATH: userPath,
      HOME: join(dir, 'home'),
      GATEWAY_HOME: join(dir, 'gateway-home'),
      GATEWAY_PORT: String(await freePort()),
      STAGING_PORT: String(await freePort()),
      UNINSTALL_PROGRAM: removeProgram.replace(/^prefix=~\/\.local$/m, `prefix=${prefix}`),
      GATEWAY_PREFIX: isolated ? '' : prefix,
      OUT: out,
      FIRST: first,
      SECOND: second,
      npm_config_update_notifier: 'false',
    };
    const command = isolated ? ['unshare', '--mount', 'bash', script] : ['bash', script];
    const run = spawnSync(command[0]!, command.slice(1), { env, encoding: 'utf8', timeout: 1_180_000 });
    expect(run.status, run.stderr).to.equal(0);

    const step = (name: string) => ({
      code: Number(readFileSync(join(out, `${name}.code`), 'utf8')),
      stdout: readFileSync(join(out, `${name}.out`), 'utf8'),
      stderr: readFileSync(join(out, `${name}.err`), 'utf8'),
    });
    const install1 = step('install-1');
    expect(install1.code, install1.stderr + install1.stdout).to.equal(0);
    expect(install1.stdout).to.match(/The daemon of profile "default" is running at http:\/\/127\.0\.0\.1:\d+/);
    if (isolated) expect(install1.stdout, 'root has /usr/local/bin on its PATH already').to.not.include('is not on this shell');
    else expect(install1.stdout).to.include(`export PATH="${prefix}/bin:$PATH"`);

    // The launcher runs the installed copy, not the clone.
    const launcher = readFileSync(join(out, 'launcher'), 'utf8');
    expect(launcher).to.include(`${prefix}/lib/gateway/bin/run.js`).and.not.include(first);

    const status1 = step('status-1');
    expect(status1.code, status1.stderr).to.equal(0);
    const before = JSON.parse(status1.stdout);
    expect(before).to.include({ state: 'running', profile: 'default' });

    const help = step('help');
    expect(help.code, help.stderr).to.equal(0);
    expect(help.stdout).to.include('VERSION\n  gateway/');

    expect(step('start-staging').code, step('start-staging').stderr).to.equal(0);
    const stagingBefore = JSON.parse(step('staging-1').stdout);
    expect(stagingBefore).to.include({ state: 'running', profile: 'staging', port: Number(env.STAGING_PORT) });
    expect(step('create-idle').code, step('create-idle').stderr).to.equal(0);

    const install2 = step('install-2');
    expect(install2.code, install2.stderr + install2.stdout).to.equal(0);
    // Every profile that was running restarts on the new copy, and the installer names them; a stopped one stays stopped.
    expect(install2.stdout).to.include('== restarting on the new copy the daemons of the profiles that were running: default staging\n');
    expect(install2.stdout).to.match(/The daemon of profile "default" is running at/).and.match(/The daemon of profile "staging" is running at/);
    const after = JSON.parse(step('status-2').stdout);
    expect(after.state).to.equal('running');
    expect(after.pid, 'the daemon restarted on the new copy').to.not.equal(before.pid);
    const stagingAfter = JSON.parse(step('staging-2').stdout);
    expect(stagingAfter).to.include({ state: 'running', port: Number(env.STAGING_PORT) });
    expect(stagingAfter.pid, 'the second profile\'s daemon restarted on the new copy too, on the port it was started with').to.not.equal(stagingBefore.pid);
    expect(step('idle-2').code).to.equal(3);
    expect(step('stop-staging').code).to.equal(0);
    const lib = readFileSync(join(out, 'lib'), 'utf8').split('\n');
    expect(lib).to.include('gateway').and.not.include('gateway.old').and.not.include('gateway.new');

    expect(step('stop').code).to.equal(0);
    const modules = readFileSync(join(out, 'modules'), 'utf8').split('\n');
    expect(modules, 'runtime dependencies only').to.include('koa').and.not.include('typescript').and.not.include('mocha');
    expect(readdirSync(dir)).to.not.include('clone-1');

    // Removed as the README says: nothing of the gateway is left in the prefix.
    expect(step('uninstall').code, step('uninstall').stderr).to.equal(0);
    expect(readFileSync(join(out, 'lib-after'), 'utf8').split('\n').filter((name) => name.startsWith('gateway'))).to.deep.equal([]);
    expect(readFileSync(join(out, 'bin-after'), 'utf8').split('\n')).to.not.include('gateway');
  });
});
