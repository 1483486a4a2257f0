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
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

process.env.GATEWAY_STORE_CHECKS = '1';

const runDir = mkdtempSync(join(tmpdir(), 'gateway-tests-'));
// Servers started as other users (PostgreSQL's) reach their folders within it.
chmodSync(runDir, 0o755);
process.env.TMPDIR = runDir;
process.env.XDG_CONFIG_HOME = join(runDir, 'config');

// Taken already (a daemon of the host's own default profile): all the better.
createServer().on('error', () => undefined).listen(18789, '127.0.0.1').unref();

let removing = false;
export const mochaHooks = {
  // Run after each file when files run in parallel (each worker process has a folder of its own), else once.
  afterAll() {
    if (removing) return;
    removing = true;
    // At exit, after what earlier suites arranged for then (the test PostgreSQL stops before its folder goes).
    process.once('exit', () => rmSync(runDir, { recursive: true, force: true }));
  },
};
