import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { BIN, freePort, Home, waitFor } from '../support/cli.ts';
import { codeIn, IrcServer, IrcUser } from '../support/irc.ts';

describe('shell completion in real bash and zsh (e2e)', function () {
  let home: Home;
  let ircd: IrcServer;
  let path: string;

  /** What bash offers at Tab after `line` (its last word is the one completed), through the script `gateway autocomplete bash` prints. */
  const tab = (line: string): string[] => {
    const words = line.split(' ');
    const script = `
      eval "$(gateway autocomplete bash)"
      COMP_WORDS=(gateway ${words.map((word) => `'${word}'`).join(' ')})
      COMP_CWORD=${words.length}
      _gateway
      printf '%s\\n' "\${COMPREPLY[@]}"`;
    const result = spawnSync('bash', ['--norc', '-c', script], { encoding: 'utf8', env: { ...process.env, ...home.env, PATH: path } as NodeJS.ProcessEnv });
    expect(result.status, result.stderr).to.equal(0);
    return result.stdout.split('\n').filter(Boolean);
  };

  before(async () => {
    ircd = await IrcServer.start();
    // `gateway` on PATH, as an installed one is.
    const bin = mkdtempSync(join(tmpdir(), 'gateway-bin-'));
    symlinkSync(BIN, join(bin, 'gateway'));
    path = `${bin}:${dirname(process.execPath)}:/usr/bin:/bin`;
    home = new Home({ GATEWAY_PORT: String(await freePort()) });
    await home.run(['profiles', 'create', 'default', '--secrets', 'file']);
    await home.run(['profiles', 'create', 'staging', '--secrets', 'file']);
  });
  after(async () => {
    home?.cleanup();
    await ircd?.stop();
  });

  /** What the zsh function hands compadd after `line`, with compdef and compadd standing in for a completion widget's. */
  const zshTab = (line: string): string[] => {
    const words = ['gateway', ...line.split(' ')];
    const script = `
      compdef() { : }
      compadd() { [[ $1 == -- ]] && shift; print -l -- "$@" }
      eval "$(gateway autocomplete zsh)"
      words=(${words.map((word) => `'${word}'`).join(' ')})
      CURRENT=${words.length}
      _gateway`;
    const result = spawnSync('zsh', ['-f', '-c', script], { encoding: 'utf8', env: { ...process.env, ...home.env, PATH: path } as NodeJS.ProcessEnv });
    expect(result.status, result.stderr).to.equal(0);
    return result.stdout.split('\n').filter(Boolean);
  };

  it('zsh: the same candidates through its completion function', () => {
    expect(zshTab('pa')).to.deep.equal(['pair']);
    expect(zshTab('start --bind ')).to.deep.equal(['auto', 'custom', 'lan', 'loopback', 'tailnet']);
    expect(zshTab('--profile ')).to.deep.equal(['default', 'staging']);
  });

  it('completes commands, subcommands, flags and their choices', () => {
    expect(tab('pa')).to.deep.equal(['pair']);
    expect(tab('pair ')).to.deep.equal(['allowed', 'approve', 'list', 'reject', 'revoke']);
    expect(tab('service ')).to.deep.equal(['install', 'logs', 'status', 'uninstall']);
    expect(tab('start --b')).to.deep.equal(['--bind']);
    expect(tab('start --bind ')).to.deep.equal(['auto', 'custom', 'lan', 'loopback', 'tailnet']);
    expect(tab('secrets move ')).to.deep.equal(['file', 'keychain']);
  });

  it('completes from the profile: names, config keys and their choices, secret names, token ids and pending pairing codes', async () => {
    expect(tab('--profile ')).to.deep.equal(['default', 'staging']);
    expect(tab('profiles use st')).to.deep.equal(['staging']);
    expect(tab('config set gateway.bi')).to.deep.equal(['gateway.bind']);
    expect(tab('config set gateway.bind ')).to.deep.equal(['auto', 'custom', 'lan', 'loopback', 'tailnet']);
    expect(tab('secrets set webhooks.')).to.deep.equal(['webhooks.github.secret', 'webhooks.github.secret.previous']);

    const nick = 'gwcompl';
    await home.run(['config', 'set', 'channels.irc', JSON.stringify({ enabled: true, host: '127.0.0.1', port: ircd.port, nick, reconnectMaxDelayMs: 2000 })]);
    expect((await home.run(['start'])).code).to.equal(0);
    const token = JSON.parse((await home.run(['tokens', 'create', '--name', 'tab', '--scope', 'jobs:read', '--json'])).stdout) as { id: string };
    expect(tab('tokens revoke ')).to.include(token.id);

    await waitFor(async () => (await home.run(['channels', 'status', '--json'])).stdout.includes('"connected"') || undefined, 20_000, 'IRC');
    const stranger = await IrcUser.connect(ircd.port, 'Stranger7');
    try {
      stranger.say(nick, 'hello');
      const code = codeIn((await stranger.waitFor(/pairing code is/)).text);
      expect(tab('pair approve ')).to.include('irc');
      expect(tab('pair approve irc ')).to.deep.equal([code]);
      expect(tab('pair approve irc ZZ')).to.deep.equal(code.startsWith('ZZ') ? [code] : []);
    } finally {
      stranger.quit();
    }
  });
});
