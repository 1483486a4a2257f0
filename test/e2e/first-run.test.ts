import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { BIN, ROOT } from '../support/cli.ts';

/** A Node older than 22.22 on this host (Debian 12's is 20), to run entry points with. */
function oldNode(): string | undefined {
  for (const candidate of ['/usr/bin/node', '/usr/local/bin/node', '/bin/node']) {
    const probe = spawnSync(candidate, ['-p', 'process.versions.node'], { encoding: 'utf8' });
    if (probe.status !== 0) continue;
    const [major, minor] = probe.stdout.trim().split('.').map(Number) as [number, number];
    if (major < 22 || (major === 22 && minor < 22)) return candidate;
  }
  return undefined;
}

describe('first run on a Node that is too old (e2e)', function () {
  const node = oldNode();
  before(function () {
    // The CI machine has Debian's Node 20; a host with only a new Node has nothing to show here.
    if (!node) this.skip();
  });

  const expectMessageFirst = (output: string) => {
    const text = output.split('\n').filter((line) => line.trim() && !line.startsWith('npm warn Unknown '));
    expect(text[0], output).to.match(/^gateway needs Node\.js >= 22\.22; this is v\d+/);
    expect(output).to.include('npm pack node-linux-').and.include('scripts/install.sh');
  };

  it('says so first, with the way to a newer Node, from the gateway command', () => {
    for (const args of [['--version'], ['status'], ['start'], ['run'], ['stauts']]) {
      const result = spawnSync(node!, [BIN, ...args], { encoding: 'utf8', env: { ...process.env, GATEWAY_HOME: mkdtempSync(join(tmpdir(), 'old-node-')) } });
      expect(result.status, args.join(' ')).to.equal(1);
      expect(result.stdout).to.equal('');
      expectMessageFirst(result.stderr);
    }
  });

  it('says so first from npm run build and npm test, and npm ci refuses before installing anything', () => {
    const path = `${dirname(node!)}:${process.env.PATH}`;
    for (const script of ['build', 'test']) {
      const result = spawnSync('npm', ['run', script], { cwd: ROOT, encoding: 'utf8', env: { ...process.env, PATH: path } });
      expect(result.status, script).to.not.equal(0);
      expectMessageFirst(result.stderr);
    }
    // A copy without node_modules: engine-strict stops npm ci at once, naming the Node it needs; nothing is fetched.
    const copy = mkdtempSync(join(tmpdir(), 'old-node-ci-'));
    try {
      for (const file of ['package.json', 'package-lock.json', '.npmrc']) cpSync(join(ROOT, file), join(copy, file));
      const result = spawnSync('npm', ['ci', '--no-audit', '--no-fund'], { cwd: copy, encoding: 'utf8', env: { ...process.env, PATH: path }, timeout: 120_000 });
      expect(result.status).to.not.equal(0);
      expect(result.stderr).to.include('EBADENGINE').and.include('gateway-daemon').and.include('>=22.22');
      expect(spawnSync('ls', [join(copy, 'node_modules')]).status).to.not.equal(0);
    } finally {
      rmSync(copy, { recursive: true, force: true });
    }
  });
});
