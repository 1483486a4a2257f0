import { spawn, spawnSync } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { BIN, type CliResult } from './cli.ts';

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
    return new Promise((resolve) => {
      const full: Record<string, string | undefined> = { ...process.env, CI: 'true', ...env };
      for (const key of Object.keys(full)) if (full[key] === undefined) delete full[key];
      const child = spawn('ip', ['netns', 'exec', this.name, process.execPath, BIN, ...args], { env: full as NodeJS.ProcessEnv, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (chunk) => { stdout += chunk; });
      child.stderr.on('data', (chunk) => { stderr += chunk; });
      child.on('close', (code) => {
        let json: unknown;
        try {
          json = JSON.parse(stdout);
        } catch {
          json = undefined;
        }
        resolve({ code, stdout, stderr, json });
      });
    });
  }
}
