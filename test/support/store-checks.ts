/**
 * Loaded before every suite: the store checks its callers (see
 * src/server/store/database.ts), in this process and in every daemon the
 * tests start, which inherit the environment.
 */
process.env.GATEWAY_STORE_CHECKS = '1';
