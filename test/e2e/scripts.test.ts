import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { BIN, freePort, Home } from '../support/cli.ts';

/** A shell pipeline run as a script would run it: bash with pipefail, the CLI as `G`. */
function pipeline(home: Home, script: string, env: Record<string, string> = {}) {
  return spawnSync('bash', ['-o', 'pipefail', '-c', `G() { node ${BIN} "$@"; }\n${script}`], {
    env: { ...process.env, ...home.env, CI: 'true', ...env } as NodeJS.ProcessEnv,
    encoding: 'utf8',
    timeout: 60_000,
  });
}

describe('gateway in scripts: pipes, mistypes, damaged settings (e2e)', function () {
  let home: Home;
  beforeEach(async () => {
    home = new Home({ GATEWAY_PORT: String(await freePort()) });
    await home.run(['profiles', 'create', 'default', '--secrets', 'file']);
  });
  afterEach(() => home.cleanup());

  it('ends quietly with its own exit code when the reader of its output goes away', async () => {
    expect((await home.run(['start'])).code).to.equal(0);
    const run = pipeline(home, `
      for i in 1 2 3 4 5; do
        G status | head -1 > /dev/null; echo "status=$?"
        G config list | grep -q gateway.port; echo "grep=$?"
        G config list | head -1 > /dev/null; echo "list=$?"
        G --help | head -1 > /dev/null; echo "help=$?"
      done
    `);
    expect(run.stderr).to.not.include('unsettled');
    expect(run.stderr).to.not.include('EPIPE');
    for (const line of run.stdout.trim().split('\n')) expect(line).to.match(/=0$/);
    expect(run.stdout.trim().split('\n')).to.have.length(20);
    // A stopped daemon: status still ends with its own code (3), quietly.
    await home.run(['stop']);
    const stopped = pipeline(home, 'G status | head -1 > /dev/null; echo "status=${PIPESTATUS[0]}"');
    expect(stopped.stdout.trim()).to.equal('status=3');
  });

  it('treats a mistyped command as a usage error that suggests, never runs, what may have been meant', async () => {
    const typo = await home.run(['stauts']);
    expect(typo.code).to.equal(2);
    expect(typo.stderr).to.include('"stauts" is not a gateway command').and.include('gateway status');
    const json = await home.run(['strat', '--json']);
    expect(json.code).to.equal(2);
    expect(json.json.error).to.include({ code: 'USAGE', exitCode: 2 });
    expect(json.json.error.message).to.include('gateway start');
    const topic = await home.run(['config', 'lst']);
    expect(topic.code).to.equal(2);
    expect(topic.stderr).to.include('"gateway config list"');
    const extra = await home.run(['status', 'extra', '--json']);
    expect(extra.code).to.equal(2);
    expect(extra.json.error.message).to.include('Unexpected argument for gateway status: extra');

    // On a terminal too: Enter is not a yes to anything, and nothing starts.
    const tty = spawnSync('script', ['-qec', `node ${BIN} stauts; echo "exit=$?"`, '/dev/null'], {
      env: { ...process.env, ...home.env, CI: '' } as NodeJS.ProcessEnv, input: '\n\n', encoding: 'utf8', timeout: 30_000,
    });
    expect(tty.stdout).to.include('exit=2');
    expect(tty.stdout).to.not.include('(Y/n)');
    expect(existsSync(home.file('daemon.json'))).to.equal(false);
  });

  it('reports a running daemon from its lock whatever config.json says, beside what is wrong with it', async () => {
    expect((await home.run(['start'])).code).to.equal(0);
    writeFileSync(home.file('config.json'), JSON.stringify({ gateway: { port: 'abc' } }));
    const invalid = await home.run(['status', '--json']);
    expect(invalid.code).to.equal(0);
    expect(invalid.json).to.include({ state: 'running', profile: 'default' });
    expect(invalid.json.url).to.not.include('abc');
    expect(invalid.json.configError).to.include('gateway.port');
    expect(invalid.json.rpc.ok).to.equal(true);
    writeFileSync(home.file('config.json'), '{not json');
    const broken = await home.run(['status']);
    expect(broken.code).to.equal(0);
    expect(broken.stdout).to.match(/State:\s+running/);
    expect(broken.stdout).to.include('INVALID');
    expect(broken.stderr).to.include('not valid JSON');
    await home.run(['stop']);
    expect((await home.run(['status'])).code).to.equal(78);
  });

  it('mends a damaged config.json with config unset, one problem at a time, and never loses the profile\'s store or port', async () => {
    const port = await freePort();
    await home.run(['profiles', 'create', 'other', '--secrets', 'file', '--port', String(port)]);
    expect((await home.run(['start', '--profile', 'other'], { env: { GATEWAY_PORT: undefined } })).code).to.equal(0);
    const token = home.token('other');
    await home.run(['stop', '--profile', 'other'], { env: { GATEWAY_PORT: undefined } });

    writeFileSync(home.file('config.json', 'other'), JSON.stringify({ gateway: { port: 'abc', bogus: true, auth: { mode: 'token' } } }));
    const start = await home.run(['start', '--profile', 'other', '--json'], { env: { GATEWAY_PORT: undefined } });
    expect(start.code).to.equal(78);
    expect(start.json.error.hints).to.include.members(['gateway config unset gateway.bogus   # drops the bad setting', 'gateway config unset gateway.port   # drops the bad setting']);
    const first = await home.run(['config', 'unset', 'gateway.bogus', '--profile', 'other', '--json']);
    expect(first.code, first.stderr).to.equal(0);
    expect(first.json.remainingProblems).to.deep.equal(['gateway.port: must be integer']);
    const second = await home.run(['config', 'unset', 'gateway.port', '--profile', 'other', '--json']);
    expect(second.code, second.stderr).to.equal(0);
    expect(second.json.remainingProblems).to.equal(undefined);
    expect(JSON.parse(readFileSync(home.file('config.json', 'other'), 'utf8'))).to.deep.equal({ gateway: { auth: { mode: 'token' } } });
    // A change that leaves it broken, or breaks it, writes nothing.
    const bad = await home.run(['config', 'set', 'gateway.port', '"x"', '--profile', 'other']);
    expect(bad.code).to.equal(2);

    // Removing config.json resets settings, never the secret store or the port the profile was made with.
    rmSync(home.file('config.json', 'other'));
    const again = await home.run(['start', '--profile', 'other', '--json'], { env: { GATEWAY_PORT: undefined } });
    expect(again.code, again.stderr).to.equal(0);
    expect(again.json.port).to.equal(port);
    expect(home.token('other')).to.equal(token);
    expect(existsSync(home.file('secrets.json', 'other'))).to.equal(true);
    await home.run(['stop', '--profile', 'other'], { env: { GATEWAY_PORT: undefined } });
  });

  it('keeps the CLI connected when the auth mode changes on a running daemon, and undoes it', async () => {
    expect((await home.run(['start'])).code).to.equal(0);
    const set = await home.run(['config', 'set', 'gateway.auth.mode', 'none', '--json']);
    expect(set.json.restartRequired).to.equal(true);
    const status = await home.run(['status', '--json']);
    expect(status.json.rpc.ok, JSON.stringify(status.json.rpc)).to.equal(true);
    const unset = await home.run(['config', 'unset', 'gateway.auth.mode']);
    expect(unset.code, unset.stderr).to.equal(0);
    expect(unset.stdout).to.include('Unset gateway.auth.mode');
    expect((await home.run(['sessions', 'list'])).code).to.equal(0);
  });

  it('tightens a secret file others can read, says so, and logs secret names but not values', async () => {
    expect((await home.run(['start'])).code).to.equal(0);
    await home.run(['stop']);
    chmodSync(home.file('secrets.json'), 0o644);
    const listed = await home.run(['secrets', 'list']);
    expect(listed.code).to.equal(0);
    expect(listed.stderr).to.include('was readable by others (mode 0644)');
    expect(statSync(home.file('secrets.json')).mode & 0o777).to.equal(0o600);

    expect((await home.run(['start'])).code).to.equal(0);
    const set = await home.run(['secrets', 'set', 'hooks.token'], { input: 'very-secret-hooks-value' });
    expect(set.code).to.equal(0);
    const log = readFileSync(home.file('gateway.log'), 'utf8');
    expect(log).to.include('"secretName":"hooks.token"');
    expect(log).to.not.include('very-secret-hooks-value');
  });

  it('says a gateway that refuses this CLI is an error, not a status', async () => {
    expect((await home.run(['start'])).code).to.equal(0);
    const stranger = new Home();
    try {
      const status = await stranger.run(['status', '--url', `ws://127.0.0.1:${home.env.GATEWAY_PORT}`, '--json']);
      expect(status.code).to.equal(1);
      expect(status.json.error.message).to.include('refused this CLI');
      expect(status.json).to.not.have.property('pid');
    } finally {
      stranger.cleanup();
    }
  });
});
