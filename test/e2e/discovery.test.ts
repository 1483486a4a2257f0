import { expect } from 'chai';
import { spawn, spawnSync } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { freePort, Home, runCli, type CliResult } from '../support/cli.ts';
import { TestHost } from '../support/netns.ts';

/** Two hosts on a link of their own: two network namespaces joined by a veth pair, multicast routed over it, never this machine's network. */
class Lan {
  readonly names = [`gwlan${randomInt(1e6)}a`, `gwlan${randomInt(1e6)}b`] as const;
  readonly subnet = randomInt(2, 250);
  readonly addresses = [`10.233.${this.subnet}.1`, `10.233.${this.subnet}.2`] as const;
  private readonly link = `gwm${randomInt(1e6)}`;

  create(): void {
    const [a, b] = this.names;
    const steps = [
      ['netns', 'add', a], ['netns', 'add', b],
      ['link', 'add', `${this.link}a`, 'type', 'veth', 'peer', 'name', `${this.link}b`],
      ['link', 'set', `${this.link}a`, 'netns', a], ['link', 'set', `${this.link}b`, 'netns', b],
      ...(['a', 'b'] as const).flatMap((side, index) => {
        const ns = this.names[index]!;
        const dev = `${this.link}${side}`;
        return [
          ['netns', 'exec', ns, 'ip', 'addr', 'add', `${this.addresses[index]}/30`, 'dev', dev],
          ['netns', 'exec', ns, 'ip', 'link', 'set', dev, 'up', 'multicast', 'on'],
          ['netns', 'exec', ns, 'ip', 'link', 'set', 'lo', 'up'],
          ['netns', 'exec', ns, 'ip', 'route', 'add', '224.0.0.0/4', 'dev', dev],
        ];
      }),
    ];
    for (const step of steps) {
      const result = spawnSync('ip', step, { encoding: 'utf8' });
      if (result.status !== 0) throw new Error(`ip ${step.join(' ')} failed: ${result.stderr}`);
    }
  }

  destroy(): void {
    for (const name of this.names) spawnSync('ip', ['netns', 'del', name]);
  }

  run(side: 0 | 1, args: string[], env: Record<string, string | undefined>): Promise<CliResult> {
    return runCli(args, { env, stdin: 'ignore', prefix: ['ip', 'netns', 'exec', this.names[side]] });
  }
}

interface Found { name: string; addresses: string[]; port: number; profile: string; version: string; auth: string; tls: boolean }

describe('local discovery over multicast DNS (e2e, two network namespaces)', function () {
  let lan: Lan;
  const homes: Home[] = [];
  before(function () {
    if (TestHost.available()) return;
    if (process.env.CI) throw new Error('network namespace tests need root and iproute2');
    this.skip();
  });
  beforeEach(() => {
    lan = new Lan();
    lan.create();
  });
  afterEach(() => {
    for (const home of homes.splice(0)) home.cleanup();
    lan.destroy();
  });

  const daemon = async (side: 0 | 1, args: string[] = ['--bind', 'lan'], settings: [string, string][] = []) => {
    const home = new Home({ GATEWAY_PORT: String(await freePort()) });
    homes.push(home);
    for (const [key, value] of settings) await lan.run(side, ['config', 'set', key, value], home.env);
    const started = await lan.run(side, ['start', ...args], home.env);
    expect(started.code, started.stderr).to.equal(0);
    return home;
  };
  const discover = async (side: 0 | 1, timeout = '2s'): Promise<Found[]> => {
    const result = await lan.run(side, ['discover', '--timeout', timeout, '--json'], new Home().env);
    expect(result.code, result.stderr).to.equal(0);
    return (result.json as { gateways: Found[] }).gateways;
  };
  const until = async (side: 0 | 1, test: (found: Found[]) => boolean): Promise<Found[]> => {
    const deadline = Date.now() + 20_000;
    for (;;) {
      const found = await discover(side);
      if (test(found) || Date.now() > deadline) return found;
    }
  };

  it('announces a gateway bound beyond loopback with what a client needs and no secret; the other host discovers it', async () => {
    const home = await daemon(0);
    const { port } = home.lock();
    const found = await until(1, (list) => list.length > 0);
    expect(found).to.have.length(1);
    const [gateway] = found;
    expect(gateway).to.include({ port, profile: 'default', auth: 'token', tls: false });
    expect(gateway!.name).to.match(/ gateway default$/);
    expect(gateway!.addresses).to.include(lan.addresses[0]);
    expect(gateway!.version).to.match(/^\d+\.\d+\.\d+/);
    const text = JSON.stringify(found);
    for (const secret of Object.values(home.secrets())) expect(text).not.to.include(secret);
    const human = await lan.run(1, ['discover', '--timeout', '2s'], new Home().env);
    expect(human.stdout).to.include(`${lan.addresses[0]}:${port}`);
  });

  it('renames the second of two gateways that claim the same name, keeps the new name, and says goodbye at stop', async () => {
    const first = await daemon(0);
    await until(1, (list) => list.length === 1);
    const second = await daemon(1);
    const found = await until(0, (list) => list.length === 2);
    expect(found.map((gateway) => gateway.name)).to.have.length(2);
    const renamed = found.find((gateway) => / \(2\)$/.test(gateway.name));
    expect(renamed, JSON.stringify(found)).to.not.equal(undefined);
    expect(renamed!.addresses).to.include(lan.addresses[1]);
    expect(existsSync(second.file('mdns.json'))).to.equal(true);
    expect(JSON.parse(readFileSync(second.file('mdns.json'), 'utf8')).name).to.equal(renamed!.name);

    // A listener on the other host hears the goodbye (TTL 0) when the first stops.
    const listener = spawn('ip', ['netns', 'exec', lan.names[1], process.execPath, '-e', `
      const mdns = require('multicast-dns')();
      mdns.on('response', (packet) => {
        for (const record of packet.answers) if (record.type === 'PTR' && record.name === '_gateway._tcp.local' && record.ttl === 0) {
          process.stdout.write('goodbye ' + record.data + '\\n');
        }
      });
      setTimeout(() => process.exit(0), 8000);
    `], { cwd: process.cwd(), stdio: ['ignore', 'pipe', 'inherit'] });
    let heard = '';
    listener.stdout.on('data', (chunk) => { heard += chunk; });
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect((await lan.run(0, ['stop'], first.env)).code).to.equal(0);
    await new Promise((resolve) => listener.on('exit', resolve));
    expect(heard).to.match(/goodbye .* gateway default\._gateway\._tcp\.local/);
    const after = await discover(1);
    expect(after.map((gateway) => gateway.name)).to.deep.equal([renamed!.name]);
  });

  it('never announces on loopback, nor when turned off', async () => {
    await daemon(0, []);
    await daemon(1, ['--bind', 'lan'], [['gateway.discovery.mdns.enabled', 'false']]);
    expect(await discover(0, '3s')).to.deep.equal([]);
    const refused = await lan.run(0, ['discover', '--timeout', 'soon'], new Home().env);
    expect(refused.code).to.equal(2);
  });
});
