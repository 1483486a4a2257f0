import { expect } from 'chai';
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { freePort, Home } from '../support/cli.ts';

describe('CLI contract (e2e)', function () {
  let home: Home;
  beforeEach(() => { home = new Home(); });
  afterEach(() => home.cleanup());

  it('answers --version without a daemon', async () => {
    const result = await home.run(['--version']);
    expect(result.code).to.equal(0);
    expect(result.stdout).to.match(/^gateway\/\d+\.\d+\.\d+ /);
  });

  it('refuses an invalid profile name with exit 2 and creates nothing', async () => {
    for (const name of ['Bad', '-x', 'a'.repeat(33), 'a/b', '../etc']) {
      const result = await home.run(['start', '--profile', name, '--json']);
      expect(result.code, name).to.equal(2);
      expect(result.json.error.message).to.include('Invalid profile name');
    }
    expect(existsSync(`${home.dir}/profiles`)).to.equal(false);
    const fromEnv = await home.run(['status'], { env: { GATEWAY_PROFILE: 'NO!' } });
    expect(fromEnv.code).to.equal(2);
  });

  it('exits 5 for a named profile that does not exist, and 2 for unknown flags', async () => {
    for (const args of [['status'], ['stop'], ['logs'], ['config', 'get', 'gateway.port'], ['secrets', 'list'], ['profiles', 'show']]) {
      const result = await home.run([...args, '--profile', 'ghost', '--json']);
      expect(result.code, args.join(' ')).to.equal(5);
      expect(result.json.error.message).to.include('Profile "ghost" does not exist');
    }
    const unknown = await home.run(['status', '--frobnicate']);
    expect(unknown.code).to.equal(2);
  });

  it('reports a corrupt config.json with its path, exits 78, and never rewrites it', async () => {
    mkdirSync(home.profileDir(), { recursive: true, mode: 0o700 });
    const corrupt = '{"gateway": {"port": 18789,, }';
    writeFileSync(home.file('config.json'), corrupt, { mode: 0o600 });
    for (const args of [['start'], ['config', 'set', 'gateway.bind', 'lan'], ['config', 'list'], ['status']]) {
      const result = await home.run([...args, '--json']);
      expect(result.code, args.join(' ')).to.equal(78);
      // status reports the daemon's state beside the config's problem; the others fail with it.
      expect(args[0] === 'status' ? result.json.configError : result.json.error.message).to.include(home.file('config.json'));
      expect(readFileSync(home.file('config.json'), 'utf8')).to.equal(corrupt);
    }
    const invalid = JSON.stringify({ gateway: { port: 'high', bogus: true } });
    writeFileSync(home.file('config.json'), invalid);
    const result = await home.run(['start', '--json']);
    expect(result.code).to.equal(78);
    expect(result.json.error.message).to.include('gateway.port').and.to.include('gateway.bogus');
    expect(readFileSync(home.file('config.json'), 'utf8')).to.equal(invalid);
  });

  it('refuses a channel id that names no channel kind, with the kind meant', async () => {
    const typo = await home.run(['config', 'set', 'channels.telgram.enabled', 'true', '--json']);
    expect(typo.code).to.equal(2);
    expect(typo.json.error.message).to.include('no channel kind is named telgram').and.to.include('did you mean telegram?');
    expect(existsSync(home.file('config.json')) ? readFileSync(home.file('config.json'), 'utf8') : '').to.not.include('telgram');
    expect((await home.run(['config', 'set', 'channels.telegram.enabled', 'true'])).code).to.equal(0);
    // A plugin may add a channel of its own: with plugins configured, the name waits for the daemon to say.
    expect((await home.run(['config', 'set', 'plugins.load', '["./plugins/chat-bridge"]'])).code).to.equal(0);
    expect((await home.run(['config', 'set', 'channels.bridge.enabled', 'true'])).code).to.equal(0);
  });

  it('sets, gets, lists and unsets config keys with types checked and keys named', async () => {
    const set = await home.run(['config', 'set', 'gateway.bind', 'custom', '--json']);
    expect(set.code, set.stderr).to.equal(0);
    expect(set.json).to.include({ key: 'gateway.bind', value: 'custom', via: 'file' });
    expect((await home.run(['config', 'set', 'gateway.customBindHost', '127.0.0.1'])).code).to.equal(0);
    expect((await home.run(['config', 'set', 'gateway.trustedProxies', '["10.0.0.0/8"]'])).code).to.equal(0);
    expect((await home.run(['config', 'set', 'gateway.controlUi.enabled', 'false'])).code).to.equal(0);
    const get = await home.run(['config', 'get', 'gateway.trustedProxies', '--json']);
    expect(get.json).to.deep.include({ key: 'gateway.trustedProxies', value: ['10.0.0.0/8'], source: 'config' });
    const defaulted = await home.run(['config', 'get', 'hooks.path', '--json']);
    expect(defaulted.json).to.include({ value: '/hooks', source: 'default' });
    expect((await home.run(['config', 'get', 'gateway.port'])).stdout.trim()).to.equal('18789');

    const unknown = await home.run(['config', 'set', 'gateway.nope', '1', '--json']);
    expect(unknown.code).to.equal(2);
    expect(unknown.json.error.message).to.include('gateway.nope');
    const wrongType = await home.run(['config', 'set', 'gateway.port', 'high', '--json']);
    expect(wrongType.code).to.equal(2);
    expect(wrongType.json.error.message).to.include('gateway.port');
    const badEnum = await home.run(['config', 'set', 'gateway.auth.mode', 'magic', '--json']);
    expect(badEnum.json.error.message).to.include('gateway.auth.mode').and.to.include('token');
    const readOnly = await home.run(['config', 'set', 'secrets.backend', 'keychain', '--json']);
    expect(readOnly.code).to.equal(2);
    const badHost = await home.run(['config', 'set', 'gateway.customBindHost', 'not-an-ip']);
    expect(badHost.code).to.equal(2);

    // A profile with nothing set lists nothing set: exit 0, an empty set.
    expect((await home.run(['profiles', 'create', 'blank'])).code).to.equal(0);
    const blank = await home.run(['config', 'list', '--set-only', '--profile', 'blank', '--json']);
    expect(blank.code, blank.stderr).to.equal(0);
    expect(blank.json.set).to.deep.equal({});
    const blankHuman = await home.run(['config', 'list', '--set-only', '--profile', 'blank']);
    expect(blankHuman.code).to.equal(0);
    expect(blankHuman.stdout).to.match(/^Nothing is set in .*config\.json: every setting has its default/);

    const list = await home.run(['config', 'list', '--json']);
    expect(list.json.config.gateway.bind).to.equal('custom');
    expect(list.json.config.gateway.auth.mode).to.equal('token');
    expect(list.json.config.hooks).to.include({ enabled: false, path: '/hooks' });
    // Only the channels configured: none here.
    expect(list.json.config.channels).to.deep.equal({});
    expect(list.json.set).to.not.have.nested.property('hooks');
    const human = await home.run(['config', 'list']);
    expect(human.stdout).to.include('gateway.bind = "custom"').and.to.include('gateway.auth.mode = "token" (default)');

    const unset = await home.run(['config', 'unset', 'gateway.controlUi.enabled', '--json']);
    expect(unset.json).to.include({ key: 'gateway.controlUi.enabled', value: true });
    const file = JSON.parse(readFileSync(home.file('config.json'), 'utf8'));
    expect(file.gateway).to.not.have.property('controlUi');
    expect(statSync(home.file('config.json')).mode & 0o777).to.equal(0o600);
  });

  it('starts on a custom bind and refuses exposure without auth (exit 78, naming the setting)', async () => {
    const port = await freePort();
    await home.run(['config', 'set', 'gateway.port', String(port)]);
    await home.run(['config', 'set', 'gateway.bind', 'custom']);
    await home.run(['config', 'set', 'gateway.customBindHost', '127.0.0.1']);
    const started = await home.run(['start', '--json']);
    expect(started.code, started.stderr).to.equal(0);
    expect(started.json.url).to.equal(`http://127.0.0.1:${port}`);
    expect((await home.run(['stop'])).code).to.equal(0);

    await home.run(['config', 'set', 'gateway.auth.mode', 'none']);
    const exposed = await home.run(['start', '--bind', 'lan', '--json']);
    expect(exposed.code).to.equal(78);
    expect(exposed.json.error.message).to.include('gateway.auth.mode');
    expect(existsSync(home.file('daemon.json'))).to.equal(false);
    await home.run(['config', 'set', 'gateway.auth.mode', 'token']);
    await home.run(['config', 'set', 'gateway.overlay.mode', 'funnel']);
    const funnel = await home.run(['start', '--json']);
    expect(funnel.code).to.equal(78);
    expect(funnel.json.error.message).to.include('gateway.auth.mode password');
  });

  it('refuses a tailnet bind when the host has no overlay address', async () => {
    const result = await home.run(['start', '--bind', 'tailnet', '--json']);
    expect(result.code).to.equal(78);
    expect(result.json.error.message).to.include('100.64.0.0/10');
  });

  it('applies config changes through a running daemon and says whether a restart is needed', async () => {
    const port = await freePort();
    await home.run(['start'], { env: { GATEWAY_PORT: String(port) } });
    const env = { GATEWAY_PORT: String(port) };
    const live = await home.run(['config', 'set', 'log.level', 'debug', '--json'], { env });
    expect(live.json).to.include({ via: 'daemon', restartRequired: false });
    const needsRestart = await home.run(['config', 'set', 'gateway.bind', 'lan', '--json'], { env });
    expect(needsRestart.json).to.include({ via: 'daemon', restartRequired: true });
    const human = await home.run(['config', 'set', 'gateway.bind', 'loopback'], { env });
    expect(human.stdout).to.include('needs a restart').and.to.include('gateway restart --profile default');
    const refused = await home.run(['config', 'set', 'gateway.port', '0', '--json'], { env });
    expect(refused.code).to.equal(2);
  });

  it('manages profiles: create, list, show, use, remove', async () => {
    const created = await home.run(['profiles', 'create', 'staging', '--port', '18800', '--json']);
    expect(created.code, created.stderr).to.equal(0);
    expect(created.json).to.include({ name: 'staging', port: 18800, secretStore: 'file' });
    expect(statSync(home.profileDir('staging')).mode & 0o777).to.equal(0o700);
    const duplicate = await home.run(['profiles', 'create', 'staging']);
    expect(duplicate.code).to.equal(1);
    const collision = await home.run(['profiles', 'create', 'other', '--port', '18800', '--json']);
    expect(collision.code).to.equal(2);
    expect(collision.json.error.message).to.include('18800').and.to.include('staging');
    const derived = await home.run(['profiles', 'create', 'qa', '--json']);
    expect(derived.json.port).to.be.within(20000, 32767);
    const again = await home.run(['profiles', 'show', 'qa', '--json']);
    expect(again.json.port).to.equal(derived.json.port);

    const list = await home.run(['profiles', '--json']);
    expect(list.json.profiles.map((p: { name: string }) => p.name)).to.deep.equal(['default', 'qa', 'staging']);
    expect(list.json.current).to.equal('default');
    const listed = await home.run(['profiles', 'list']);
    expect(listed.stdout).to.include('staging').and.to.include('18800');

    expect((await home.run(['profiles', 'use', 'staging'])).code).to.equal(0);
    const shown = await home.run(['profiles', 'show', '--json']);
    expect(shown.json).to.include({ name: 'staging', current: true, port: 18800, bind: 'loopback', authMode: 'token' });
    expect((await home.run(['profiles', 'use', 'ghost'])).code).to.equal(5);
    const envWins = await home.run(['profiles', 'show', '--json'], { env: { GATEWAY_PROFILE: 'qa' } });
    expect(envWins.json.name).to.equal('qa');

    const noTerminal = await home.run(['profiles', 'remove', 'staging', '--json'], { stdin: 'ignore' });
    expect(noTerminal.code).to.equal(2);
    expect(noTerminal.json.error.message).to.include('--yes');
    expect(existsSync(home.profileDir('staging'))).to.equal(true);
    const removed = await home.run(['profiles', 'remove', 'staging', '--yes', '--json']);
    expect(removed.code).to.equal(0);
    expect(existsSync(home.profileDir('staging'))).to.equal(false);
    expect((await home.run(['profiles', 'show', '--json'])).json.name).to.equal('default');
    expect((await home.run(['profiles', 'remove', 'default', '--yes'])).code).to.equal(2);
  });

  it('removes a profile with a running daemon: stops it and deletes its folder', async () => {
    const port = await freePort();
    await home.run(['profiles', 'create', 'tmp', '--port', String(port)]);
    const started = await home.run(['start', '--profile', 'tmp', '--json']);
    const removed = await home.run(['profiles', 'remove', 'tmp', '--yes', '--json']);
    expect(removed.json).to.include({ removed: true, stoppedDaemon: true });
    const { processState } = await import('../../src/shared/daemon-lock.ts');
    expect(processState(started.json.pid)).to.not.equal('alive');
  });

  it('keeps secrets in the 0600 file without a keychain, never printing values', async () => {
    const empty = await home.run(['secrets', 'set', 'gateway.password', '--json'], { input: '' });
    expect(empty.code).to.equal(2);
    const closed = await home.run(['secrets', 'set', 'gateway.password'], { stdin: 'ignore' });
    expect(closed.code).to.equal(2);
    const unknown = await home.run(['secrets', 'set', 'nope'], { input: 'x' });
    expect(unknown.code).to.equal(2);

    const set = await home.run(['secrets', 'set', 'gateway.password', '--json'], { input: 's3cret-value\n' });
    expect(set.code, set.stderr).to.equal(0);
    expect(set.json).to.include({ name: 'gateway.password', backend: 'file', daemonNotified: false });
    expect(set.stderr).to.include('No OS keychain is reachable');
    const file = JSON.parse(readFileSync(home.file('secrets.json'), 'utf8'));
    expect(file.secrets['gateway.password']).to.equal('s3cret-value');
    expect(statSync(home.file('secrets.json')).mode & 0o777).to.equal(0o600);
    for (const file of ['config.json', 'profile.json']) {
      if (existsSync(home.file(file))) expect(readFileSync(home.file(file), 'utf8')).to.not.include('s3cret');
    }

    await home.run(['secrets', 'set', 'webhooks.github.secret'], { input: 'one' });
    const rotated = await home.run(['secrets', 'set', 'webhooks.github.secret', '--keep-previous', '--json'], { input: 'two' });
    expect(rotated.json.keptPrevious).to.equal(true);
    const second = await home.run(['secrets', 'set', 'gateway.token'], { input: 'x'.repeat(40) });
    expect(second.stderr).to.not.include('No OS keychain');

    const list = await home.run(['secrets', 'list', '--json'], { env: { GATEWAY_HOOKS_TOKEN: 'from-env' } });
    expect(list.json.backend).to.equal('file');
    expect(list.json.secrets.map((s: { name: string }) => s.name)).to.deep.equal(['gateway.password', 'gateway.token', 'hooks.token', 'webhooks.github.secret', 'webhooks.github.secret.previous']);
    expect(list.stdout).to.not.include('s3cret').and.to.not.include('from-env').and.to.not.include('two');

    const unset = await home.run(['secrets', 'unset', 'gateway.password', '--json']);
    expect(unset.json.removed).to.equal(true);
    const again = await home.run(['secrets', 'unset', 'gateway.password', '--json']);
    expect(again.json.removed).to.equal(false);
  });

  it('uses GATEWAY_TOKEN for both the daemon and the CLI, and reports a wrong token without leaking it', async () => {
    const port = await freePort();
    const env = { GATEWAY_PORT: String(port), GATEWAY_TOKEN: 'env-token-0123456789-abcdefghijkl' };
    expect((await home.run(['start'], { env })).code).to.equal(0);
    expect(existsSync(home.file('secrets.json')) && readFileSync(home.file('secrets.json'), 'utf8').includes('env-token')).to.equal(false);
    const ok = await home.run(['status', '--json'], { env });
    expect(ok.json.rpc.ok).to.equal(true);
    const wrong = await home.run(['status', '--json'], { env: { ...env, GATEWAY_TOKEN: 'wrong-token-value' } });
    expect(wrong.code).to.equal(0);
    expect(wrong.json.rpc.ok).to.equal(false);
    const denied = await home.run(['config', 'set', 'log.level', 'warn', '--json'], { env: { ...env, GATEWAY_TOKEN: 'wrong-token-value' } });
    expect(denied.code).to.equal(1);
    expect(denied.json.error.code).to.equal('UNAUTHORIZED');
    expect(denied.stdout + denied.stderr).to.not.include('env-token').and.to.not.include('wrong-token-value');
    expect(readFileSync(home.file('gateway.log'), 'utf8')).to.not.include('wrong-token-value').and.to.not.include('env-token');
  });

  it('exits 3 with the start hint when a command needs a daemon that is not running', async () => {
    await home.run(['config', 'set', 'log.level', 'info']);
    const { connectToDaemon } = await import('../../src/cli/rpc-client.ts');
    const { profilePaths } = await import('../../src/shared/profile.ts');
    try {
      await connectToDaemon(profilePaths('default', home.dir));
      expect.fail('connected');
    } catch (error) {
      expect((error as { exitCode: number }).exitCode).to.equal(3);
      expect((error as { hints: string[] }).hints).to.deep.equal(['gateway start --profile default']);
    }
  });

  it('takes the global flags anywhere on the line: --profile, -p, --profile= and --json before, between and after the command', async () => {
    const port = await freePort();
    expect((await home.run(['profiles', 'create', 'staging', '--port', String(port)])).code).to.equal(0);
    try {
      const started = await home.run(['--profile', 'staging', 'start', '--json']);
      expect(started.code, started.stderr).to.equal(0);
      for (const args of [
        ['--profile', 'staging', 'status', '--json'], ['-p', 'staging', 'status', '--json'], ['--profile=staging', 'status', '--json'],
        ['--json', 'status', '--profile', 'staging'], ['--json', '-p', 'staging', 'status'], ['status', '-p', 'staging', '--json'],
      ]) {
        const status = await home.run(args);
        expect(status.code, args.join(' ')).to.equal(0);
        expect(status.json, args.join(' ')).to.include({ profile: 'staging', state: 'running' });
      }
      // Between a topic and its command, and before a command oclif loads.
      for (const args of [['tokens', '--json', 'list', '-p', 'staging'], ['-p', 'staging', '--json', 'tokens', 'list'], ['--profile', 'staging', 'config', 'get', 'gateway.port', '--json']]) {
        const listed = await home.run(args);
        expect(listed.code, `${args.join(' ')}: ${listed.stderr}`).to.equal(0);
        expect(listed.json, args.join(' ')).to.be.an('object');
      }
      // Nothing after -- is taken for a global flag.
      const sent = await home.run(['-p', 'staging', 'config', 'set', 'log.level', '--', '--json']);
      expect(sent.code).to.equal(2);
    } finally {
      await home.run(['stop', '--profile', 'staging']);
    }
  });

  it('spells a flag one way in every command, takes both its forms, and names the flag meant for a near miss', async () => {
    await home.run(['start'], { env: { GATEWAY_PORT: String(await freePort()) } });
    try {
      const repeated = await home.run(['tokens', 'create', '--name', 'a', '--scope', 'jobs:read', '--scope', 'tokens:read', '--json']);
      const listed = await home.run(['tokens', 'create', '--name', 'b', '--scopes', 'jobs:read,tokens:read', '--json']);
      for (const created of [repeated, listed]) {
        expect(created.code, created.stderr).to.equal(0);
        expect(created.json.scopes).to.deep.equal(['jobs:read', 'tokens:read']);
      }
      const invites = [
        await home.run(['devices', 'invite', '--scope', 'operator.read', '--scope', 'operator.write', '--json']),
        await home.run(['devices', 'invite', '--scopes', 'operator.read,operator.write', '--json']),
        await home.run(['devices', 'invite', '--scope', 'operator.read,operator.write', '--json']),
      ];
      for (const invite of invites) expect(invite.code, invite.stderr).to.equal(0);
      const unknownScope = await home.run(['devices', 'invite', '--scope', 'operator.everything', '--json']);
      expect(unknownScope.code).to.equal(2);
      expect(unknownScope.json.error.message).to.include('unknown scope operator.everything');
      const near = await home.run(['tokens', 'create', '--name', 'c', '--scop', 'jobs:read', '--json']);
      expect(near.code).to.equal(2);
      expect(near.json.error.message).to.include('Did you mean --scope?');
      const far = await home.run(['tokens', 'create', '--name', 'c', '--frobnicate', 'x']);
      expect(far.code).to.equal(2);
      expect(far.stderr).to.include('Nonexistent flag: --frobnicate');
      expect(far.stderr).to.not.include('Did you mean');
    } finally {
      await home.run(['stop']);
    }
  });

  it('says how to start a stopped profile, and where its secrets are as --json does', async () => {
    expect((await home.run(['start'], { env: { GATEWAY_PORT: String(await freePort()) } })).code).to.equal(0);
    await home.run(['stop']);
    const status = await home.run(['status']);
    expect(status.code).to.equal(3);
    expect(status.stdout).to.match(/State: +stopped/);
    expect(status.stdout).to.match(/Secrets: +file/);
    expect(status.stderr).to.include('Start it: gateway start --profile default');
    const json = await home.run(['status', '--json']);
    expect(json.code).to.equal(3);
    expect(json.json).to.include({ state: 'stopped', secretStore: 'file' });
    // The same through oclif (a form the fast path leaves to it).
    const slow = await home.run(['status', '--json'], { env: { GATEWAY_CONTENT_TYPE: 'x' } });
    expect(slow.json).to.include({ state: 'stopped', secretStore: 'file' });
  });

  it('calls itself gateway in help as in --version, and describes each topic as a topic', async () => {
    const help = await home.run(['--help']);
    expect(help.stdout).to.match(/VERSION\n {2}gateway\/\d+\.\d+\.\d+ /);
    expect(help.stdout).to.not.include('gateway-daemon/');
    const pair = await home.run(['pair', '--help']);
    expect(pair.stdout.split('\n')[0]).to.equal('Approve, reject and revoke the direct-message pairing codes of strangers on a channel.');
    // Every topic has a description of its own, never one of its commands'.
    const { readFileSync: read } = await import('node:fs');
    const manifest = JSON.parse(read(new URL('../../oclif.manifest.json', import.meta.url), 'utf8')) as { commands: Record<string, unknown> };
    const topics = new Set(Object.keys(manifest.commands).filter((id) => id.includes(':')).map((id) => id.split(':').slice(0, -1).join(':')));
    const declared = JSON.parse(read(new URL('../../package.json', import.meta.url), 'utf8')).oclif.topics as Record<string, unknown>;
    expect([...topics].filter((topic) => !declared[topic])).to.deep.equal([]);
  });

  it('names a misspelt channel in sessions list --channel (exit 5 and the channels there are, as pair list does) instead of answering an empty list', async () => {
    expect((await home.run(['start'], { env: { GATEWAY_PORT: String(await freePort()) } })).code).to.equal(0);
    try {
      const misspelt = await home.run(['sessions', 'list', '--channel', 'telgram', '--json']);
      expect(misspelt.code).to.equal(5);
      const message = 'No channel named telgram; did you mean telegram? (channels: api, automation, chat, delegate, deltachat, discord, email, irc, matrix, signal, slack, telegram, whatsapp, xmpp).';
      expect(misspelt.stderr).to.include(message);
      expect(misspelt.json.error).to.include({ code: 'NOT_FOUND', exitCode: 5, message });
      // A known channel with no session yet, and where sessions without a channel come from: an empty list.
      for (const channel of ['telegram', 'chat']) {
        const empty = await home.run(['sessions', 'list', '--channel', channel, '--json']);
        expect(empty.code, `${channel}: ${empty.stderr}`).to.equal(0);
        expect(empty.json).to.deep.equal({ sessions: [] });
      }
    } finally {
      await home.run(['stop']);
    }
  });

  it('takes -h as --help everywhere: the root, a topic, a command, and the plain status and start oclif is not loaded for', async () => {
    for (const words of [[], ['status'], ['start'], ['run'], ['tokens'], ['tokens', 'list'], ['config', 'set']]) {
      const long = await home.run([...words, '--help']);
      const short = await home.run([...words, '-h']);
      expect(short.code, `gateway ${words.join(' ')} -h: ${short.stderr}`).to.equal(0);
      expect(short.stdout, `gateway ${words.join(' ')} -h`).to.equal(long.stdout).and.include('USAGE');
      expect(short.stderr).to.equal('');
    }
    // Beside the global flags, wherever they stand; and nothing was started.
    const placed = await home.run(['-p', 'default', 'start', '-h']);
    expect(placed.code).to.equal(0);
    expect(placed.stdout).to.include('USAGE\n  $ gateway start');
    expect((await home.run(['status'])).code).to.equal(3);
  });
});
