import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT, waitFor } from '../support/cli.ts';

/**
 * scripts/test.ts (npm test after the build) in a clone of its own: the real c8, and a stand-in for mocha that
 * starts a few Node processes, as the suite's CLI calls and daemons are, each leaving its raw coverage file.
 */
function clone(): string {
  const dir = mkdtempSync(join(tmpdir(), 'test-runner-'));
  mkdirSync(join(dir, 'scripts'));
  copyFileSync(join(ROOT, 'scripts/test.ts'), join(dir, 'scripts/test.ts'));
  mkdirSync(join(dir, 'node_modules/.bin'), { recursive: true });
  symlinkSync(join(ROOT, 'node_modules/c8/bin/c8.js'), join(dir, 'node_modules/.bin/c8'));
  writeFileSync(join(dir, 'node_modules/.bin/mocha'), `#!${process.execPath}
const { execFileSync } = require('node:child_process');
require('node:fs').appendFileSync(${JSON.stringify(join(dir, 'runs'))}, process.argv.slice(2).join(' ') + '\\n');
for (let i = 0; i < 3; i++) execFileSync(process.execPath, ['-e', 'Math.max(1, 2)']);
if (process.env.MOCHA_STAND_IN_WAIT) {
  require('node:fs').writeFileSync(${JSON.stringify(join(dir, 'waiting'))}, '');
  setInterval(() => undefined, 1000);
}
else {
  process.exitCode = Number(process.env.MOCHA_STAND_IN_EXIT ?? 0);
  // What the suite's reporter leaves: one failure, as a failing run would.
  if (process.exitCode) require('node:fs').writeFileSync(process.env.GATEWAY_TEST_RESULTS, JSON.stringify({ passes: 2, failures: 1, pending: 0, failed: [{ title: 'a feature works', file: 'test/e2e/a.test.ts', error: 'expected 1 to equal 2' }], slowest: [{ file: 'test/e2e/a.test.ts', seconds: 1.5 }] }));
  else require('node:fs').writeFileSync(process.env.GATEWAY_TEST_RESULTS, JSON.stringify({ passes: 3, failures: 0, pending: 1, failed: [] }));
}
`);
  chmodSync(join(dir, 'node_modules/.bin/mocha'), 0o755);
  return dir;
}

describe('npm test\'s runner, scripts/test.ts: coverage without its raw files (e2e, the real c8)', function () {
  let dir: string;
  beforeEach(() => { dir = clone(); });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const run = (env: Record<string, string> = {}) => {
    // Not the coverage of a suite this test may itself run under.
    const { NODE_V8_COVERAGE: _, ...outer } = process.env;
    const child = spawn(process.execPath, [join(dir, 'scripts/test.ts')], { cwd: dir, env: { ...outer, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout!.on('data', (chunk) => { output += chunk; });
    child.stderr!.on('data', (chunk) => { output += chunk; });
    return { child, output: () => output, exited: once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]> };
  };

  it('makes the report, keeps its summary, removes the raw coverage files, and runs the PostgreSQL suites after a failure', async () => {
    const { exited, output } = run({ MOCHA_STAND_IN_EXIT: '3' });
    const [code] = await exited;
    expect(code, output()).to.equal(3);
    expect(output()).to.match(/Statements\s+:/).and.include('== the suite on SQLite failed (exit 3)').and.include('== the suite on PostgreSQL');
    expect(readFileSync(join(dir, 'runs'), 'utf8')).to.equal('\n--config test/mocharc.postgres.json\n');
    // The end of the output says what failed, in which suite, whatever the suites printed before.
    expect(output().slice(output().lastIndexOf('== summary'))).to.equal('== summary\nSQLite: 2 passed, 1 failed\n  ✗ a feature works (test/e2e/a.test.ts)\n      expected 1 to equal 2\n  slowest: test/e2e/a.test.ts 1.5 s\nPostgreSQL: 2 passed, 1 failed\n  ✗ a feature works (test/e2e/a.test.ts)\n      expected 1 to equal 2\n  slowest: test/e2e/a.test.ts 1.5 s\n');
    expect(readdirSync(join(dir, 'coverage')).sort()).to.deep.equal(['coverage-summary.json', 'results-PostgreSQL.json', 'results-SQLite.json']);
    expect(JSON.parse(readFileSync(join(dir, 'coverage/coverage-summary.json'), 'utf8'))).to.have.property('total');
  });

  it('removes them when the run is stopped half-way, and exits as the signal says', async () => {
    const { child, exited, output } = run({ MOCHA_STAND_IN_WAIT: '1' });
    const raw = join(dir, 'coverage/tmp');
    // Stopped once its processes have ended, each leaving its file (a process still running when the run is stopped leaves one later).
    await waitFor(() => existsSync(join(dir, 'waiting')), 20_000, 'the suite\'s processes');
    expect(readdirSync(raw).length).to.be.at.least(3);
    child.kill('SIGTERM');
    const [code] = await exited;
    expect(code, output()).to.equal(143);
    expect(output()).to.include('== interrupted (SIGTERM)').and.not.include('== the suite on PostgreSQL');
    expect(existsSync(raw), existsSync(raw) ? readdirSync(raw).join(', ') : '').to.equal(false);
  });
});
