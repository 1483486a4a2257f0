// Mocha's spec reporter, closing with the plain "N passed, N failed" line CI reads, and the failures' titles again
// (a long run's spec output puts them far above its end), and the ten files whose tests took longest. With GATEWAY_TEST_RESULTS set, the same summary is written
// there as JSON, for `npm test` to repeat once every suite has run.
const Mocha = require('mocha');
const { writeFileSync } = require('node:fs');

class Reporter extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options);
    const failed = [];
    // The time each file's tests took (their hooks not counted), to name the slowest files at the end.
    const byFile = new Map();
    const timed = (test) => {
      if (!test.file || typeof test.duration !== 'number') return;
      const file = require('node:path').relative(process.cwd(), test.file);
      byFile.set(file, (byFile.get(file) || 0) + test.duration);
    };
    runner.on(Mocha.Runner.constants.EVENT_TEST_PASS, timed);
    runner.on(Mocha.Runner.constants.EVENT_TEST_FAIL, timed);
    runner.on(Mocha.Runner.constants.EVENT_TEST_FAIL, (test, err) => {
      const first = String((err && err.message) || err).split('\n')[0].slice(0, 300);
      failed.push({ title: test.fullTitle(), file: test.file ? require('node:path').relative(process.cwd(), test.file) : undefined, error: first });
    });
    runner.once(Mocha.Runner.constants.EVENT_RUN_END, () => {
      const { passes, failures, pending } = this.stats;
      const lines = failed.map((f) => `  ✗ ${f.title}${f.file ? ` (${f.file})` : ''}\n      ${f.error}`);
      const slowest = [...byFile].sort((a, b) => b[1] - a[1]).slice(0, 10).map(([file, ms]) => ({ file, seconds: Math.round(ms / 100) / 10 }));
      process.stdout.write(`\n${passes} passed, ${failures} failed${pending ? `, ${pending} skipped` : ''}\n${lines.length ? `${lines.join('\n')}\n` : ''}`);
      if (slowest.length) process.stdout.write(`the slowest files: ${slowest.map((s) => `${s.file} ${s.seconds} s`).join(', ')}\n`);
      if (process.env.GATEWAY_TEST_RESULTS) {
        writeFileSync(process.env.GATEWAY_TEST_RESULTS, JSON.stringify({ passes, failures, pending, failed, slowest }));
      }
    });
  }
}

module.exports = Reporter;
