import { spawnSync } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { runCli, type CliResult } from './cli.ts';

/**
 * A second host for tests: a network namespace joined to this one by a veth
 * pair on a private /30 that only this test uses. Needs root (CI runs as root).
 */
export class TestHost {
  readonly name = `gwtest${randomInt(1e6)}`;
  readonly subnet = randomInt(2, 250);
  readonly hostAddress = `10.231.${this.subnet}.1`;
  readonly address = `10.231.${this.subnet}.2`;
  private readonly link = `gw${randomInt(1e6)}`;

  static available(): boolean {
    return process.getuid?.() === 0 && spawnSync('ip', ['-V']).status === 0;
  }

  /**
   * Registers mocha hooks that give each test of the suite a fresh second host;
   * returns a getter for it. Skips the suite where namespaces cannot be made,
   * except in CI, where that is a failure.
   */
  static perTest(): () => TestHost {
    let current: TestHost | undefined;
    before(function () {
      if (TestHost.available()) return;
      if (process.env.CI) throw new Error('network namespace tests need root and iproute2');
      this.skip();
    });
    beforeEach(() => {
      current = new TestHost();
      current.create();
    });
    afterEach(() => current?.destroy());
    return () => current!;
  }

  create(): void {
    const steps = [
      ['netns', 'add', this.name],
      ['link', 'add', `${this.link}a`, 'type', 'veth', 'peer', 'name', `${this.link}b`],
      ['link', 'set', `${this.link}b`, 'netns', this.name],
      ['addr', 'add', `${this.hostAddress}/30`, 'dev', `${this.link}a`],
      ['link', 'set', `${this.link}a`, 'up'],
      ['netns', 'exec', this.name, 'ip', 'addr', 'add', `${this.address}/30`, 'dev', `${this.link}b`],
      ['netns', 'exec', this.name, 'ip', 'link', 'set', `${this.link}b`, 'up'],
      ['netns', 'exec', this.name, 'ip', 'link', 'set', 'lo', 'up'],
    ];
    for (const step of steps) {
      const result = spawnSync('ip', step, { encoding: 'utf8' });
      if (result.status !== 0) throw new Error(`ip ${step.join(' ')} failed: ${result.stderr}`);
    }
  }

  destroy(): void {
    spawnSync('ip', ['link', 'del', `${this.link}a`]);
    spawnSync('ip', ['netns', 'del', this.name]);
  }

  /** Runs the gateway CLI on this host, as a user there would. */
  run(args: string[], env: Record<string, string | undefined>): Promise<CliResult> {
    return runCli(args, { env, stdin: 'ignore', prefix: ['ip', 'netns', 'exec', this.name] });
  }
}
