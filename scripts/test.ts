// `npm test` after the build and the typecheck: the whole suite on SQLite (with coverage), then the suites that
// share a store again on PostgreSQL (test/mocharc.postgres.json). Both always run; the exit code is the first
// failure's, so neither run can hide the other.
import { spawnSync } from 'node:child_process';

const root = new URL('..', import.meta.url).pathname;
const bin = (name: string) => `${root}node_modules/.bin/${name}`;
const runs: [string, string[]][] = [
  ['SQLite', [bin('c8'), '--reporter=text-summary', bin('mocha')]],
  ['PostgreSQL', [bin('mocha'), '--config', 'test/mocharc.postgres.json']],
];
let exitCode = 0;
for (const [name, [command, ...args]] of runs) {
  process.stderr.write(`\n== the suite on ${name}\n`);
  const run = spawnSync(command!, args, { cwd: root, stdio: 'inherit' });
  const code = run.status ?? 1;
  if (code !== 0) process.stderr.write(`== the suite on ${name} failed (exit ${code})\n`);
  if (exitCode === 0) exitCode = code;
}
process.exit(exitCode);
