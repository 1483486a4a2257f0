/**
 * Loaded before every suite (.mocharc.json, test/mocharc.postgres.json):
 *
 * - the store checks its callers (see src/server/store/database.ts), in this
 *   process and in every daemon the tests start, which inherit the environment;
 * - everything the tests make in the temporary folder (homes, databases,
 *   fakes, copies of programs) goes into one folder of this process's (each
 *   worker of a parallel run has its own), removed when it ends, whatever
 *   it leaves behind;
 * - the default profile's port (18789) is taken for the whole run, as the
 *   daemon a user started with the quick start takes it: a test that would
 *   touch it fails here as it would on that host;
 * - a command run without a home of its test's own finds its profiles in that
 *   folder too, never in the user's ~/.config/gateway.
 */
import { chmodSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

process.env.GATEWAY_STORE_CHECKS = '1';

// A worker of a parallel run (mocha --parallel forks them, each with MOCHA_WORKER_ID) makes its folder inside the
// run's, under a short name: servers' Unix sockets within it must fit in 107 bytes.
// (A mocha started by a test inherits the variable, but not the channel its parent talks to its workers over.)
const worker = process.env.MOCHA_WORKER_ID !== undefined && typeof process.send === 'function';
const runDir = mkdtempSync(join(tmpdir(), worker ? 'w-' : 'gateway-tests-'));
// Servers started as other users (PostgreSQL's) reach their folders within it.
chmodSync(runDir, 0o755);
process.env.TMPDIR = runDir;
process.env.XDG_CONFIG_HOME = join(runDir, 'config');
// The ports freePort() has handed out to any process of the run, so that no two workers are given the same one.
if (!worker) {
  process.env.GATEWAY_TEST_PORTS = join(runDir, 'ports');
  mkdirSync(process.env.GATEWAY_TEST_PORTS);
}

// Taken already (a daemon of the host's own default profile): all the better.
createServer().on('error', () => undefined).listen(18789, '127.0.0.1').unref();

let removing = false;
// The process that runs no test itself (the parallel run's own) removes the run's folder, its workers' with it, as it ends.
if (!worker) process.once('exit', () => removing || rmSync(runDir, { recursive: true, force: true }));
export const mochaHooks = {
  // Run after each file when files run in parallel (in the workers), else once.
  afterAll() {
    if (removing) return;
    removing = true;
    // At exit, after what earlier suites arranged for then (the test PostgreSQL stops before its folder goes).
    process.once('exit', () => rmSync(runDir, { recursive: true, force: true }));
  },
};
