#!/usr/bin/env node
// The `gateway` executable. It answers --version before loading oclif, starts
// a daemon spawned by `gateway start` without loading oclif at all, and turns
// on Node's compile cache so every later start is cheaper.
import { readFileSync } from 'node:fs';
import module from 'node:module';

const [major, minor] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 22)) {
  process.stderr.write(`gateway needs Node.js >= 22.22; this is ${process.version}.\n`);
  process.exit(1);
}
module.enableCompileCache?.();

const argv = process.argv.slice(2);
if (argv.length === 1 && (argv[0] === '--version' || argv[0] === '-v')) {
  const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
  process.stdout.write(`gateway/${version} ${process.platform}-${process.arch} node-${process.version}\n`);
} else if (argv[0] === 'run' && argv.includes('--detached')) {
  // `gateway start` spawns `gateway run --detached` with flags it has already checked.
  const { parseArgs } = await import('node:util');
  const { values } = parseArgs({
    args: argv.slice(1),
    options: {
      profile: { type: 'string' }, port: { type: 'string' }, bind: { type: 'string' },
      verbose: { type: 'boolean' }, detached: { type: 'boolean' },
    },
  });
  const { main } = await import('../dist/server/main.js');
  process.exitCode = await main({
    profile: values.profile ?? 'default',
    port: values.port === undefined ? undefined : Number(values.port),
    bind: values.bind,
    verbose: values.verbose,
  });
} else {
  const { execute } = await import('@oclif/core');
  await execute({ dir: import.meta.url });
}
