import { expect } from 'chai';
import { BUILTIN_MODULES } from '../../../src/server/daemon.ts';
import { inDependencyOrder } from '../../../src/server/kernel/host.ts';
import { defineModule } from '../../../src/server/kernel/module.ts';
import greetings from '../../fixtures/modules/greetings/module.ts';
import { startGateway, type TestGateway } from '../../support/harness.ts';
import { waitFor } from '../../support/cli.ts';

describe('modules, composed in process', function () {
  let gateway: TestGateway;
  before(async () => { gateway = await startGateway({ modules: [...BUILTIN_MODULES, greetings] }); });
  after(() => gateway.stop());

  it('serves a module\'s route with the auth it declares, its path parameters, and 405 for other methods', async () => {
    expect((await gateway.request('/greetings/ada')).status).to.equal(401);
    const hello = await gateway.request('/greetings/ada', { auth: true });
    expect(hello).to.deep.include({ status: 200, body: { greeting: 'hello, ada' } });
    const bad = await gateway.request('/greetings/ADA', { auth: true });
    expect(bad.body).to.deep.equal({ error: 'bad_request', message: 'name must be 1-20 lower-case letters.', statusCode: 400 });
    const wrong = await gateway.request('/greetings/ada', { method: 'POST', auth: true });
    expect(wrong.status).to.equal(405);
    expect(wrong.headers.get('allow')).to.equal('GET');
  });

  it('answers a module\'s RPC method, its params checked against the schema it declares', async () => {
    const client = await gateway.operator();
    const raw = client as unknown as { request: (method: string, params?: unknown) => Promise<unknown> };
    expect(await raw.request('greetings.greet', { name: 'bob' })).to.deep.equal({ greeting: 'hello, bob' });
    const refused = await raw.request('greetings.greet', { name: 7 }).catch((error: Error & { rpcCode?: string }) => error);
    expect((refused as { rpcCode: string }).rpcCode).to.equal('INVALID_REQUEST');
    expect((refused as Error).message).to.include('name must be string');
  });

  it('lists a module\'s tool with its schema, and runs its job handler through the queue', async () => {
    const client = await gateway.operator();
    const { tools } = await client.call('tools.catalog');
    expect(tools.find((tool) => tool.name === 'greetings.later')).to.include({ plugin: 'greetings', dangerous: false });
    const queued = await gateway.request('/tools/invoke', { method: 'POST', auth: true, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ tool: 'greetings.later', args: { name: 'cy' } }) });
    expect(queued.status).to.equal(200);
    const job = await waitFor(async () => {
      const found = await client.call('jobs.get', { id: queued.body.result.jobId });
      return found.status === 'succeeded' ? found : undefined;
    }, 5000, 'the greeting job');
    expect(job.result).to.deep.equal({ sent: 'hello, cy' });
    const { plugins } = await client.call('plugins.list');
    expect(plugins.find((entry) => entry.name === 'greetings')).to.deep.include({
      builtin: true, status: 'loaded',
      registered: { routes: ['GET /greetings/:name (exact)'], wsRoutes: [], methods: ['greetings.greet'], tools: ['greetings.later'], channels: [], jobKinds: ['greetings.send'] },
    });
  });
});

describe('module composition', () => {
  const a = defineModule({ id: 'a', setup: () => undefined });
  const b = defineModule({ id: 'b', needs: [a], setup: () => undefined });
  const c = defineModule({ id: 'c', needs: [b], setup: () => undefined });

  it('sets modules up after the modules they need, whatever the listed order', () => {
    expect(inDependencyOrder([c, b, a]).map((module) => module.id)).to.deep.equal(['a', 'b', 'c']);
  });

  it('refuses a module whose need is not composed, one composed twice, and needs in a circle', () => {
    expect(() => inDependencyOrder([c, b])).to.throw(/module b needs module a, which is not composed/);
    expect(() => inDependencyOrder([a, a])).to.throw(/composed twice/);
    const x: { id: string; needs: unknown[]; setup: () => void } = { id: 'x', needs: [], setup: () => undefined };
    const y = { id: 'y', needs: [x], setup: () => undefined };
    x.needs.push(y);
    expect(() => inDependencyOrder([x as never, y as never])).to.throw(/in a circle: x -> y -> x/);
  });

  it('composes every built-in module', () => {
    expect(inDependencyOrder(BUILTIN_MODULES).map((module) => module.id)).to.include.members(['core', 'tokens', 'jobs', 'webhooks', 'hooks', 'channels', 'pairing', 'nodes', 'tools', 'plugins', 'surfaces']);
  });
});
