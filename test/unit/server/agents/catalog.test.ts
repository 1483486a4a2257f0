import { expect } from 'chai';
import { effectiveConfig } from '../../../../src/shared/config/keys.ts';
import type { GatewayConfig } from '../../../../src/shared/config/types.ts';
import { AgentCatalog, directSettings } from '../../../../src/server/agents/catalog.ts';
import { DomainError } from '../../../../src/server/kernel/errors.ts';

const registry = ['memory.search', 'memory.get', 'memory.note', 'jobs.get', 'jobs.enqueue', 'files.read', 'exec', 'message.send']
  .map((name) => ({ name, description: `does ${name}`, inputSchema: { type: 'object' }, dangerous: false }));

describe('agents: the catalog of agents and their tools', () => {
  let config: GatewayConfig;
  let built: number;
  const catalog = () => new AgentCatalog(() => config, () => {
    built++;
    return registry;
  });
  beforeEach(() => {
    built = 0;
    config = effectiveConfig({ agents: { main: { model: 'a/m' }, ops: { model: 'a/m', tools: ['jobs.*'], toolProfile: 'minimal' } } });
  });

  it('the default agent: runtime.defaultAgent, else the one named default, else the first', () => {
    expect(catalog().defaultAgent()).to.equal('main');
    config = effectiveConfig({ agents: { main: { model: 'a/m' }, default: { model: 'a/m' } } });
    expect(catalog().defaultAgent()).to.equal('default');
    config = effectiveConfig({ agents: { main: { model: 'a/m' }, ops: { model: 'a/m' } }, runtime: { defaultAgent: 'ops' } });
    expect(catalog().defaultAgent()).to.equal('ops');
    expect(catalog().list().map((agent) => [agent.id, agent.default])).to.deep.equal([['main', false], ['ops', true]]);
  });

  it('resolves an agent by id, or says which there are', () => {
    expect(catalog().resolve('ops').settings.tools).to.deep.equal(['jobs.*']);
    expect(catalog().resolve().id).to.equal('main');
    const unknown = (() => { try { catalog().resolve('nope'); } catch (error) { return error as DomainError; } })()!;
    expect([unknown.status, unknown.code, unknown.message]).to.deep.equal([404, 'agent_not_found', 'No agent "nope" (agents: main, ops).']);
    expect(() => catalog().resolve('toString'), 'not an inherited property').to.throw(DomainError, /No agent "toString"/);
    config = effectiveConfig({});
    expect(() => catalog().resolve()).to.throw(DomainError, /No agent is configured: gateway config set agents.main/);
  });

  it('gives an agent the tools its list and its profile name, and builds no catalog for an agent without tools', () => {
    expect(catalog().toolsFor(catalog().resolve('ops').settings).map((spec) => spec.name)).to.deep.equal(['memory.search', 'memory.get', 'memory.note', 'jobs.get', 'jobs.enqueue']);
    expect(catalog().toolsFor(catalog().resolve('ops').settings)[0]).to.deep.equal({ name: 'memory.search', description: 'does memory.search', inputSchema: { type: 'object' } });
    built = 0;
    expect(catalog().toolsFor(catalog().resolve('main').settings)).to.deep.equal([]);
    expect(built).to.equal(0);
    expect(catalog().toolsFor({ ...catalog().resolve('main').settings, toolProfile: 'full' })).to.have.length(registry.length);
  });

  it('a bare model is an agent of one step with no tools or instructions of its own', () => {
    expect(directSettings('x/y')).to.include({ model: 'x/y', maxSteps: 1, instructions: '', clientTools: true, history: 0 });
    expect(catalog().toolsFor(directSettings('x/y'))).to.deep.equal([]);
  });
});
