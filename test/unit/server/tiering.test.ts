import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { DAEMON_NODE_FLAGS } from '../../../src/shared/run-args.ts';
import { restoreTiering } from '../../../src/server/core/tiering.ts';

const TIERING = new URL('../../../src/server/core/tiering.ts', import.meta.url).href;

/**
 * A process with the daemon's flags runs one function 1,500 times, restores
 * the tiering counts, then runs another as often; what V8 chose to optimise.
 */
function optimisedWith(flags: readonly string[]): { restored: boolean; compiled: string[] } {
  const script = `
    import { restoreTiering } from ${JSON.stringify(TIERING)};
    function hotBeforeReady(n) { return n * 2 + 1; }
    function hotAfterReady(n) { return n * 2 + 1; }
    let total = 0;
    for (let i = 0; i < 1500; i++) total += hotBeforeReady(i);
    const restored = restoreTiering();
    for (let i = 0; i < 1500; i++) total += hotAfterReady(i);
    await new Promise((resolve) => setTimeout(resolve, 100));
    process.stderr.write(JSON.stringify({ restored, total }) + '\\n');
  `;
  const child = spawnSync(process.execPath, [...flags, '--trace-opt', '--input-type=module', '-e', script], { encoding: 'utf8' });
  expect(child.status, child.stderr).to.equal(0);
  const compiled = [...child.stdout.matchAll(/compiling method \S+ <JSFunction (hot\w+)/g)].map((match) => match[1]!);
  return { restored: JSON.parse(child.stderr.trim().split('\n').at(-1)!).restored, compiled: [...new Set(compiled)] };
}

describe('V8 tiering counts after start-up', function () {
  this.timeout(30_000);

  it('code run a few hundred times during start-up stays unoptimised; once ready, code that is hot is optimised', () => {
    const { restored, compiled } = optimisedWith(DAEMON_NODE_FLAGS);
    expect(restored).to.equal(true);
    expect(compiled).to.deep.equal(['hotAfterReady']);
  });

  it('leaves counts alone when the daemon was not started with the raised ones, or with counts of the user\'s own', () => {
    expect(restoreTiering([])).to.equal(false);
    expect(restoreTiering(['--max-semi-space-size=16'])).to.equal(false);
    expect(restoreTiering([...DAEMON_NODE_FLAGS, '--invocation-count-for-maglev=50'])).to.equal(false);
  });
});
