#!/usr/bin/env node
// The `gateway` executable. It answers --version and a plain `status` before
// loading oclif, runs the daemon (`gateway run`, and the child `gateway start`
// spawns) without loading oclif at all, from the bundles the build makes
// (dist/daemon, dist/fast), and turns on Node's compile cache so every later
// start is cheaper. It is CommonJS (bin/package.json says so): an ES module
// here would start Node's ES module loader for every command, about 4 ms of
// `gateway --version` alone.
'use strict';
require('./check-node.cjs');
const { readFileSync } = require('node:fs');
const nodeModule = require('node:module');
const { join } = require('node:path');

nodeModule.enableCompileCache?.();

// A reader that goes away (`gateway status | head -1`) ends the output, not the
// command: it finishes quietly, with its own exit code.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (error) => {
    if (error.code !== 'EPIPE' && error.code !== 'ERR_STREAM_DESTROYED') throw error;
    // Later writes go nowhere at once, and whoever waits for the stream to drain goes on.
    stream.write = (_chunk, encoding, callback) => {
      (typeof encoding === 'function' ? encoding : callback)?.();
      return true;
    };
    stream.emit('drain');
  });
}

const root = join(__dirname, '..');

/**
 * The global flags (--profile/-p with its value, --json) may stand anywhere
 * on the line, as in gh, kubectl and docker: `gateway --profile staging
 * start`, `gateway -p staging tokens list`, `gateway --json status`. They are
 * moved behind the command's words, where every command reads them; nothing
 * after `--` is touched.
 */
function hoistGlobalFlags(argv) {
  const words = [];
  const globals = [];
  for (let index = 0; index < argv.length; index++) {
    const arg = argv[index];
    if (arg === '--') {
      words.push(...argv.slice(index));
      break;
    }
    if (arg === '--json' || arg.startsWith('--profile=')) globals.push(arg);
    else if ((arg === '--profile' || arg === '-p') && index + 1 < argv.length) globals.push(arg, argv[++index]);
    else words.push(arg);
  }
  const end = words.indexOf('--');
  return end === -1 ? [...words, ...globals] : [...words.slice(0, end), ...globals, ...words.slice(end)];
}

async function main(given) {
  const argv = given[0] === '__complete' ? given : hoistGlobalFlags(given);
  if (argv.length === 1 && (argv[0] === '--version' || argv[0] === '-v')) {
    const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
    process.stdout.write(`gateway/${version} ${process.platform}-${process.arch} node-${process.version}\n`);
  } else if (argv[0] === '__complete') {
    // Shell completion, at every Tab: no oclif, one answer per line.
    const { complete } = await import('../dist/cli/complete.js');
    const candidates = await complete(argv.slice(1)).catch(() => []);
    if (candidates.length) process.stdout.write(`${candidates.join('\n')}\n`);
  } else if (argv[0] === 'run' && !argv.includes('--help') && !argv.includes('-h')) {
    // The daemon's start path: `gateway run` (and `gateway start`'s detached child) without oclif.
    const { runCommand } = await import('../dist/daemon/main.js');
    process.exitCode = await runCommand(argv.slice(1));
  } else {
    // A plain `gateway status` or `gateway start` [--json] [--profile <name>] is answered without oclif; any other form goes to oclif.
    const fast = argv[0] === 'status' || argv[0] === 'start'
      ? await require('../dist/fast/fast-status.cjs')[argv[0] === 'status' ? 'fastStatus' : 'fastStart'](argv.slice(1))
      : undefined;
    if (fast !== undefined) {
      process.exitCode = fast;
    } else {
      const { execute } = await import('@oclif/core');
      await execute({ dir: join(root, 'package.json'), args: argv });
    }
  }
}

main(process.argv.slice(2)).catch((error) => {
  // What a command did not handle: said once, as Node would, with exit 1.
  process.exitCode = 1;
  process.stderr.write(`${error?.stack ?? error}\n`);
});
