// `npm test` after the build and the typecheck: the whole suite on SQLite (with coverage), then the suites that
// share a store again on PostgreSQL (test/mocharc.postgres.json). Both always run; the exit code is the first
// failure's, so neither run can hide the other.
//
// Coverage: every Node process the suite starts (each CLI call, each daemon) leaves a raw V8 coverage file in
// coverage/tmp, about 2 GB for the whole suite. Once c8 has made its report from them they are removed, passed,
// failed or interrupted (a process that outlives an interrupted run may still leave its file: the next run's c8
// empties the folder first); the summary stays (printed, and in coverage/coverage-summary.json).
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdirSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { constants } from 'node:os';
import { join } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const bin = (name: string) => `${root}node_modules/.bin/${name}`;
const reports = join(root, 'coverage');
const raw = join(reports, 'tmp');
const runs: [string, string[]][] = [
  // c8 reads every raw file into one report: past 4 GB of heap for the whole suite when it holds them all at once, so it
  // merges them one by one (--merge-async), and its own process gets room to spare (the processes it runs get none).
  ['SQLite', [process.execPath, '--max-old-space-size=8192', realpathSync(bin('c8')), '--merge-async', `--reports-dir=${reports}`, `--temp-directory=${raw}`, '--reporter=text-summary', '--reporter=json-summary', bin('mocha')]],
  ['PostgreSQL', [bin('mocha'), '--config', 'test/mocharc.postgres.json']],
];

// Ctrl-C reaches the suite (the same process group) and ends it; a SIGTERM sent to this process alone is passed on.
// Either way this process stays to remove the raw files.
let interrupted: NodeJS.Signals | undefined;
let running: ReturnType<typeof spawn> | undefined;
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(signal, () => {
    interrupted = signal;
    if (signal === 'SIGTERM') running?.kill(signal);
  });
}
const removeRaw = () => rmSync(raw, { recursive: true, force: true });

// Each suite's reporter leaves its summary here; once all have run, the summaries are printed again together, so the
// end of the output says what failed and where, whatever came before.
type Results = { passes: number; failures: number; pending: number; failed: { title: string; file?: string; error: string }[]; slowest?: { file: string; seconds: number }[] };
const summaries: string[] = [];
mkdirSync(reports, { recursive: true });

let exitCode = 0;
for (const [name, [command, ...args]] of runs) {
  process.stderr.write(`\n== the suite on ${name}\n`);
  const resultsFile = join(reports, `results-${name}.json`);
  rmSync(resultsFile, { force: true });
  const started = Date.now();
  const child = running = spawn(command!, args, { cwd: root, stdio: 'inherit', env: { ...process.env, GATEWAY_TEST_RESULTS: resultsFile } });
  const [status, signal] = await once(child, 'exit') as [number | null, NodeJS.Signals | null];
  running = undefined;
  process.stderr.write(`== the suite on ${name} took ${((Date.now() - started) / 60_000).toFixed(1)} minutes\n`);
  if (name === 'SQLite') removeRaw();
  const code = status ?? 1;
  if (code !== 0) process.stderr.write(`== the suite on ${name} failed (exit ${code}${signal ? `, ${signal}` : ''})\n`);
  const results = existsSync(resultsFile) ? JSON.parse(readFileSync(resultsFile, 'utf8')) as Results : undefined;
  let summary = `${name}: `;
  if (!results) summary += `ended (exit ${code}${signal ? `, ${signal}` : ''}) before its tests finished`;
  else {
    summary += `${results.passes} passed, ${results.failures} failed${results.pending ? `, ${results.pending} skipped` : ''}`;
    // Every test passed but the run still failed: the coverage report (c8) or the run's own ending.
    if (code !== 0 && results.failures === 0) summary += `; then the run ended with exit ${code}${signal ? ` (${signal})` : ''} after its tests`;
    for (const f of results.failed) summary += `\n  ✗ ${f.title}${f.file ? ` (${f.file})` : ''}\n      ${f.error}`;
    if (results.slowest?.length) summary += `\n  slowest: ${results.slowest.slice(0, 5).map((s) => `${s.file} ${s.seconds} s`).join(', ')}`;
  }
  summaries.push(summary);
  if (exitCode === 0) exitCode = code;
  // A run interrupted (Ctrl-C, SIGTERM) ends here; a run that crashed by itself (c8 out of memory) is a failure, and the
  // next suite still runs.
  if (interrupted) {
    const by = interrupted;
    process.stderr.write(`== interrupted (${by})\n`);
    process.exit(128 + constants.signals[by]);
  }
}
process.stdout.write(`\n== summary\n${summaries.join('\n')}\n`);
process.exit(exitCode);
