import { expect } from 'chai';
import { mkdirSync, readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { freePort, Home } from '../support/cli.ts';
import { sharedPostgres } from '../support/postgres.ts';
import { deliver, pushPayload, TEST_WEBHOOK_SECRET } from '../support/webhooks.ts';

/**
 * A profile made by the gateway before each feature owned its tables: its
 * whole schema was recorded as one version (schema_migrations), beside a few
 * modules' own. It holds a token and a delivery whose push job ran.
 */
const LEGACY = readFileSync(new URL('../fixtures/legacy/state.sql', import.meta.url), 'utf8');
const LEGACY_TOKEN = 'gwt_mG3Me3zFUl6QVjiyDBUYVxeTuoWBP74Y98io';
const LEGACY_JOB = 'job_0mwyimxkk000GTIlFzsO';

/** A profile whose state.db is the legacy one, with what `change` does to it first. */
async function legacyHome(change?: (db: DatabaseSync) => void): Promise<{ home: Home; base: string }> {
  const port = await freePort();
  // The state comes without the profile's other files: the secret store is named, as for a profile restored from a backup.
  const home = new Home({ GATEWAY_PORT: String(port), GATEWAY_STORE_URL: undefined, GATEWAY_WEBHOOK_SECRET: TEST_WEBHOOK_SECRET, GATEWAY_SECRETS_BACKEND: 'file' });
  mkdirSync(dirname(home.file('state.db')), { recursive: true, mode: 0o700 });
  const db = new DatabaseSync(home.file('state.db'));
  db.exec(LEGACY);
  change?.(db);
  db.close();
  return { home, base: `http://127.0.0.1:${port}` };
}

/** What the legacy profile held still works: its token, its delivery (a redelivery is a duplicate of the same job). */
async function stillWorks(base: string): Promise<void> {
  const jobs = await fetch(`${base}/jobs/${LEGACY_JOB}`, { headers: { authorization: `Bearer ${LEGACY_TOKEN}` } });
  expect(jobs.status).to.equal(200);
  expect(await jobs.json()).to.include({ kind: 'github.push', status: 'succeeded' });
  const again = await deliver(base, 'push', JSON.stringify(pushPayload(512)), { deliveryId: 'legacy-delivery', hookId: '9' });
  expect(again.body).to.include({ duplicate: true, jobId: LEGACY_JOB });
  const fresh = await deliver(base, 'push', JSON.stringify(pushPayload(512)), { hookId: '9' });
  expect(fresh.body).to.include({ duplicate: false });
}

describe('a profile made before each feature owned its tables (e2e)', () => {
  it('starts on it as it is: every change it had is recorded, not made again, and what it held still works', async () => {
    const { home, base } = await legacyHome();
    try {
      const started = await home.run(['start', '--json']);
      expect(started.code, started.stderr).to.equal(0);
      await stillWorks(base);
      const status = await home.run(['store', 'status', '--json']);
      expect(status.json.modules).to.deep.equal({
        // channels 8: the outbox, the channels' cursors, the files people send, streamed replies, spoken answers, reactions and files out, buttons, made on top of what the profile had;
        // automations 1, memory 2 and approvals 1: new; sessions 5: the messages' full-text index and each turn's person on top of what the profile had;
        // tokens 2: the token each token was made with, on top of the profile's tokens; inference 2: the person of each stored response.
        // agents 5 and models 5: the chain of agents above each delegation and each model call.
        agents: 5, approvals: 1, automations: 1, channels: 8, hooks: 1, inference: 2, jobs: 5, mcp: 1, memory: 2, models: 5, pairing: 1, sessions: 5, store: 2, tokens: 3, tools: 1, webhooks: 3,
      });
      expect((await home.run(['stop'])).code).to.equal(0);
      const db = new DatabaseSync(home.file('state.db'), { readOnly: true });
      try {
        const tables = (db.prepare("SELECT name FROM sqlite_schema WHERE type = 'table'").all() as { name: string }[]).map((row) => row.name);
        // The old records are kept aside; the unused table of the first schema is gone.
        expect(tables).to.include.members(['legacy_schema_migrations', 'legacy_module_migrations', 'module_migrations']);
        expect(tables).to.not.include.members(['schema_migrations', 'meta']);
        // Every migration recorded once.
        const rows = db.prepare('SELECT module, version FROM module_migrations').all() as { module: string; version: number }[];
        expect(new Set(rows.map((row) => `${row.module}@${row.version}`)).size).to.equal(rows.length);
      } finally {
        db.close();
      }
      // A second start finds nothing to do.
      expect((await home.run(['start'])).code).to.equal(0);
      await stillWorks(base);
    } finally {
      home.cleanup();
    }
  });

  it('makes what the old schema lacked: a module it never had is created from its first migration', async () => {
    const { home, base } = await legacyHome((db) => {
      db.exec("DROP TABLE mcp_oauth_flows; DROP TABLE mcp_tools; DELETE FROM module_migrations WHERE module = 'mcp'");
    });
    try {
      const started = await home.run(['start', '--json']);
      expect(started.code, started.stderr).to.equal(0);
      await stillWorks(base);
      expect((await home.run(['store', 'status', '--json'])).json.modules).to.include({ mcp: 1, jobs: 5 });
    } finally {
      home.cleanup();
    }
  });

  it('copied into PostgreSQL as it is, is adopted there at the first start', async function () {
    this.timeout(60_000);
    const pg = await sharedPostgres(freePort);
    const { home, base } = await legacyHome();
    const url = pg.createDatabase();
    try {
      const migrated = await home.run(['store', 'migrate', '--to', url, '--json']);
      expect(migrated.code, migrated.stderr).to.equal(0);
      const started = await home.run(['start', '--json']);
      expect(started.code, started.stderr).to.equal(0);
      await stillWorks(base);
      const status = await home.run(['store', 'status', '--json']);
      expect(status.json).to.include({ backend: 'postgres' });
      expect(status.json.modules).to.include({ jobs: 5, webhooks: 3, sessions: 5, memory: 2 });
    } finally {
      home.cleanup();
    }
  });
});
