import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from '../support/cli.ts';

describe('the test suite on a user\'s host (e2e, mocha run under test/support/setup.ts)', function () {
  this.timeout(60_000);

  it('keeps 18789 taken and the user\'s profiles out of reach while it runs, and leaves nothing in the temporary folder', () => {
    const scratch = mkdtempSync(join(tmpdir(), 'suite-'));
    try {
      // A port the outer run holds already (as a user's own daemon would): the inner run goes on all the same.
      const run = spawnSync(join(ROOT, 'node_modules/.bin/mocha'), ['--no-config', '--require', 'test/support/setup.ts', '--extension', 'ts', 'test/fixtures/suite/leaves-files.ts'], {
        cwd: ROOT, encoding: 'utf8', env: { ...process.env, TMPDIR: scratch, XDG_CONFIG_HOME: '' },
      });
      expect(run.status, run.stdout + run.stderr).to.equal(0);
      expect(run.stdout).to.include('2 passing');
      const inner = /TMPDIR=(.*)/.exec(run.stdout)![1]!;
      expect(inner.startsWith(`${scratch}/gateway-tests-`), inner).to.equal(true);
      expect(/XDG_CONFIG_HOME=(.*)/.exec(run.stdout)![1]).to.equal(join(inner, 'config'));
      expect(readdirSync(scratch)).to.deep.equal([]);
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  });
});
