import { expect } from 'chai';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { automationProblems } from '../../../../src/shared/automations.ts';
import { effectiveConfig } from '../../../../src/shared/config/keys.ts';
import type { GatewayConfig } from '../../../../src/shared/config/types.ts';
import { profilePaths } from '../../../../src/shared/profile.ts';
import { scheduleTool } from '../../../../src/server/automations/schedule-tool.ts';
import { DomainError } from '../../../../src/server/kernel/errors.ts';
import type { ToolContext } from '../../../../src/server/kernel/module.ts';
import type { Session } from '../../../../src/server/sessions/session-store.ts';

const session: Session = { key: 'irc:main:dm:ann', channel: 'irc', account: 'main', kind: 'direct', peer: 'ann', peerName: null, createdAt: 0, updatedAt: 0, messageCount: 1 };
const agentCall: ToolContext = { caller: 'agent:main', surface: 'agent', agent: 'main', person: 'irc:main:dm:ann', sessionKey: session.key, logger: pino({ level: 'silent' }) };

describe('automations: the automations.add tool', () => {
  let home: string;
  let config: GatewayConfig;
  let synced: GatewayConfig[];
  let audits: unknown[];
  const tool = () => scheduleTool({
    config: () => config,
    daemon: { paths: profilePaths('default', home), configProblems: (next) => automationProblems(next), applyConfig: (next) => void (config = next) },
    sessions: { get: async (key) => (key === session.key ? session : undefined) },
    audit: async (kind, fields) => void audits.push([kind, fields]),
    clock: { sync: async (next) => void synced.push(next), nextOf: () => Date.parse('2030-01-01T08:00:00Z') },
  });
  const refusal = (promise: unknown) => Promise.resolve(promise).then(() => expect.fail('expected a refusal'), (error: unknown) => error as DomainError);

  beforeEach(() => {
    home = mkdtempSync(join(tmpdir(), 'gateway-home-'));
    mkdirSync(join(home, 'profiles', 'default'), { recursive: true });
    const raw = { agents: { main: { model: 'x/y' } }, channels: { irc: { host: '127.0.0.1', port: 6667, nick: 'gw' } } };
    writeFileSync(profilePaths('default', home).config, JSON.stringify(raw));
    config = effectiveConfig(raw);
    synced = [];
    audits = [];
  });
  afterEach(() => rmSync(home, { recursive: true, force: true }));

  it('is for an agent\'s conversation only, with either a time or a cron expression', async () => {
    expect((await refusal(tool().handler({ prompt: 'p', at: '2030-01-01T08:00:00Z' }, { ...agentCall, surface: 'http' }))).status).to.equal(403);
    expect((await refusal(tool().handler({ prompt: 'p', at: '2030-01-01T08:00:00Z' }, { ...agentCall, sessionKey: 'irc:main:gone' }))).status).to.equal(403);
    expect((await refusal(tool().handler({ prompt: 'p' }, agentCall))).message).to.match(/either at .* or cron/);
    expect((await refusal(tool().handler({ prompt: 'p', at: '2030-01-01T08:00:00Z', cron: '0 8 * * *' }, agentCall))).status).to.equal(400);
    expect(synced).to.deep.equal([]);
  });

  it('writes the automation to the profile, applies it, audits it and puts it on the clock, answering in the session', async () => {
    const answer = await tool().handler({ prompt: 'Remind me', cron: '0 8 * * *', tz: 'Europe/Berlin' }, agentCall) as { automation: string; when: string; nextAt: string };
    expect(answer.automation).to.match(/^main-[a-z0-9]+$/);
    expect(answer.nextAt).to.equal('2030-01-01T08:00:00.000Z');
    const written = JSON.parse(readFileSync(profilePaths('default', home).config, 'utf8'));
    expect(written.automations[answer.automation]).to.deep.equal({
      trigger: { cron: '0 8 * * *', tz: 'Europe/Berlin' }, action: { agent: 'main', prompt: 'Remind me', session: 'irc:main:dm:ann', deliver: 'session' },
    });
    expect(config.automations[answer.automation], 'applied').to.include({ enabled: true });
    expect(synced).to.have.length(1);
    expect(audits).to.deep.equal([['config.changed', { actor: 'agent:main', subject: `automations.${answer.automation}` }]]);
  });
});
