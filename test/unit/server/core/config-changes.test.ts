import { expect } from 'chai';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { effectiveConfig } from '../../../../src/shared/config/keys.ts';
import type { GatewayConfig } from '../../../../src/shared/config/types.ts';
import { profilePaths, type ProfilePaths } from '../../../../src/shared/profile.ts';
import { ConfigChanges } from '../../../../src/server/core/config-changes.ts';
import { DomainError } from '../../../../src/server/kernel/errors.ts';
import type { RpcClient } from '../../../../src/server/kernel/module.ts';

const client = { clientId: 'cli', deviceId: 'device-1', address: '127.0.0.1' } as RpcClient;

describe('core: the configuration over RPC', () => {
  let home: string;
  let paths: ProfilePaths;
  let applied: GatewayConfig[];
  let audits: [string, string | undefined][];
  let problems: (next: GatewayConfig) => string[];
  let changes: ConfigChanges;
  const file = () => JSON.parse(readFileSync(paths.config, 'utf8'));

  beforeEach(() => {
    home = mkdtempSync(join(tmpdir(), 'gateway-home-'));
    paths = profilePaths('default', home);
    mkdirSync(paths.dir, { recursive: true });
    writeFileSync(paths.config, JSON.stringify({ jobs: { concurrency: 2 } }));
    applied = [];
    audits = [];
    problems = () => [];
    let current = effectiveConfig({ jobs: { concurrency: 2 } });
    changes = new ConfigChanges({
      daemon: { paths, configProblems: (next) => problems(next), applyConfig: (next) => { current = next; applied.push(next); } },
      config: () => current, log: pino({ level: 'silent' }), audit: (kind, _client, subject) => void audits.push([kind, subject]),
    });
  });
  afterEach(() => rmSync(home, { recursive: true, force: true }));

  it('reads the whole configuration, or a key with where its value comes from', () => {
    expect(changes.get('jobs.concurrency')).to.deep.equal({ key: 'jobs.concurrency', value: 2, source: 'config' });
    expect(changes.get('jobs.leaseSeconds')).to.include({ source: 'default' });
    const whole = changes.get(undefined) as { config: GatewayConfig; set: unknown };
    expect(whole.set).to.deep.equal({ jobs: { concurrency: 2 } });
    expect(whole.config.jobs.concurrency).to.equal(2);
  });

  it('writes a change, applies it and audits it; a dry run writes and applies nothing', async () => {
    const [change] = await changes.change([{ key: 'jobs.concurrency', value: 4 }], client);
    expect(change).to.include({ key: 'jobs.concurrency', value: 4, previous: 2 });
    expect(file().jobs.concurrency).to.equal(4);
    expect(applied.at(-1)!.jobs.concurrency).to.equal(4);
    expect(audits).to.deep.equal([['config.changed', 'jobs.concurrency']]);
    const result = await changes.patch([{ key: 'jobs.concurrency', value: 8 }, { key: 'jobs.leaseSeconds', value: 120 }], true, client);
    expect(result).to.include({ dryRun: true });
    expect(result.changes.map((one) => one.key)).to.deep.equal(['jobs.concurrency', 'jobs.leaseSeconds']);
    expect(file().jobs).to.deep.equal({ concurrency: 4 });
    expect(applied).to.have.length(1);
  });

  it('unsets a key with unset: true, and refuses a change that has neither a value nor unset', async () => {
    await changes.patch([{ key: 'jobs.concurrency', unset: true }], false, client);
    expect(file().jobs ?? {}).to.deep.equal({});
    const refused = await changes.patch([{ key: 'jobs.concurrency' }], false, client).catch((error: unknown) => error);
    expect(refused).to.be.instanceOf(DomainError).with.property('message', 'config.patch: the change of jobs.concurrency needs a value, or unset: true.');
  });

  it('refuses a change for the problems it would make, not for those there were', async () => {
    problems = (next) => [...(next.jobs.concurrency > 10 ? ['jobs.concurrency: too many for the modules'] : []), 'hooks.token: an old problem'];
    await changes.change([{ key: 'jobs.concurrency', value: 5 }], client);
    expect(file().jobs.concurrency).to.equal(5);
    const refused = await changes.change([{ key: 'jobs.concurrency', value: 11 }], client).catch((error: unknown) => error as Error);
    expect(refused).to.be.instanceOf(Error);
    expect((refused as Error).message).to.include('too many for the modules').and.not.include('an old problem');
    expect(file().jobs.concurrency).to.equal(5);
  });
});
