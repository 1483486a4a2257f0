/**
 * Root hooks for the end-to-end suites run against PostgreSQL
 * (test/mocharc.postgres.json): the tests' server starts before any suite, and
 * every Home then gives its daemons a fresh database on it.
 */
import { freePort } from './cli.ts';
import { sharedPostgres } from './postgres.ts';

process.env.GATEWAY_TEST_STORE = 'postgres';

export const mochaHooks = {
  async beforeAll(this: Mocha.Context) {
    this.timeout(60_000);
    await sharedPostgres(freePort);
  },
};
