import { expect } from 'chai';
import type { McpServerInfo } from '../../../../src/shared/protocol/results.ts';
import { DomainError } from '../../../../src/server/kernel/errors.ts';
import { FlowStore } from '../../../../src/server/mcp/oauth.ts';
import { McpServers, withoutDialect } from '../../../../src/server/mcp/servers.ts';
import { freshStore } from '../../../support/store.ts';
import { memorySecrets, RecordingConnection, settings, silent, tool } from './parts.ts';

describe('MCP servers: the registry of connections and their tools', () => {
  const store = freshStore();
  let secrets: ReturnType<typeof memorySecrets>;
  let changes: McpServerInfo[];
  let lost: [string, string][];
  let made: Map<string, RecordingConnection>;

  const servers = () => new McpServers({
    flows: new FlowStore(store()), secrets, log: silent, clientName: 'gateway (test)', version: '0.0.0',
    callbackUrl: () => 'http://127.0.0.1:1/oauth/mcp/callback',
    onChange: (info) => changes.push(info),
    onLoginLost: (server, reason) => lost.push([server, reason]),
    connection: (deps) => {
      const connection = new RecordingConnection(deps);
      made.set(deps.name, connection);
      return connection;
    },
  });

  beforeEach(() => {
    secrets = memorySecrets();
    changes = [];
    lost = [];
    made = new Map();
  });

  it('offers the tools each server listed last time before it connects again, and connects nothing before the daemon is ready', async () => {
    await new FlowStore(store()).saveTools('docs', [tool('search', { description: 'Search the docs' }), tool('bad name!')]);
    const registry = servers();
    await registry.sync({ docs: settings(), other: settings('https://other.example.com/mcp') });
    const source = registry.toolSource();
    expect(source.owner).to.equal('mcp');
    expect([...source.tools()].map((def) => def.name)).to.deep.equal(['mcp.docs.search']);
    expect(made.get('docs')!.connects + made.get('other')!.connects).to.equal(0);
    registry.start();
    expect([made.get('docs')!.connects, made.get('other')!.connects]).to.deep.equal([1, 1]);
  });

  it('after start, a new server connects at once, an unchanged one is left alone, a changed one reconnects', async () => {
    const registry = servers();
    await registry.sync({ docs: settings() });
    registry.start();
    await registry.sync({ docs: settings(), more: settings('https://more.example.com/mcp') });
    expect(made.get('docs')!.connects, 'unchanged').to.equal(1);
    expect(made.get('more')!.connects, 'new').to.equal(1);
    await registry.sync({ docs: settings(undefined, { timeoutMs: 5000 }), more: settings('https://more.example.com/mcp') });
    expect(made.get('docs')!.connects, 'changed').to.equal(2);
    expect(registry.find('docs').settings.timeoutMs).to.equal(5000);
    expect(made.size, 'the same connection is kept').to.equal(2);
  });

  it('a server moved to another URL forgets its login; other changes keep it', async () => {
    const registry = servers();
    await registry.sync({ docs: settings(), kept: settings('https://kept.example.com/mcp') });
    for (const name of ['docs', 'kept']) {
      await registry.find(name).credentials.saveTokens({ access_token: `${name}-access`, token_type: 'Bearer' });
      await registry.find(name).credentials.saveClient({ client_id: `${name}-client` });
    }
    await registry.sync({ docs: settings('https://moved.example.com/mcp'), kept: settings('https://kept.example.com/mcp', { scope: 'read' }) });
    expect(secrets.values.has('mcp.servers.docs.oauth')).to.equal(false);
    expect(secrets.values.has('mcp.servers.docs.client')).to.equal(false);
    expect((await registry.find('kept').credentials.tokens())?.access_token).to.equal('kept-access');
    expect(secrets.values.has('mcp.servers.kept.client')).to.equal(true);
  });

  it('a removed server stops, leaves nothing in the store, and says so', async () => {
    const flows = new FlowStore(store());
    await flows.saveTools('docs', [tool('search')]);
    await flows.save({ state: 's', server: 'docs', redirectUrl: 'x', verifier: 'v' });
    const registry = servers();
    await registry.sync({ docs: settings() });
    const connection = made.get('docs')!;
    await registry.sync({});
    expect(connection.stops).to.equal(1);
    expect(registry.get('docs')).to.equal(undefined);
    expect(await flows.savedTools('docs')).to.deep.equal([]);
    expect(await flows.take('s')).to.equal(undefined);
    expect(changes.at(-1)).to.deep.equal({ name: 'docs', url: 'https://mcp.example.com/mcp', state: 'disabled', reason: 'removed', tools: 0, auth: 'none' });
    expect([...registry.toolSource().tools()]).to.deep.equal([]);
  });

  it('finds a server by name, or answers not found with how to add it', async () => {
    const registry = servers();
    await registry.sync({ docs: settings() });
    expect(registry.find('docs').connection.name).to.equal('docs');
    expect(() => registry.find('nope')).to.throw(DomainError).with.property('message').that.matches(/gateway mcp add nope <url>/);
    expect(registry.get('nope')).to.equal(undefined);
    expect((await registry.list()).map((info) => [info.name, info.auth])).to.deep.equal([['docs', 'none']]);
  });

  it('looks tools up by their gateway name only, and hands out one definition per tool as listed', async () => {
    await new FlowStore(store()).saveTools('docs', [tool('search', { inputSchema: { $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'object', properties: { q: { type: 'string' } } } as never })]);
    const registry = servers();
    await registry.sync({ docs: settings() });
    const source = registry.toolSource();
    const def = source.get('mcp.docs.search')!;
    expect(def).to.include({ name: 'mcp.docs.search', dangerous: true, external: 'it runs on MCP server docs', description: 'search of MCP server docs' });
    expect(def.inputSchema).to.deep.equal({ type: 'object', properties: { q: { type: 'string' } } });
    expect(source.get('mcp.docs.search'), 'cached').to.equal(def);
    expect([...source.tools()][0]).to.equal(def);
    for (const name of ['mcp.docs.other', 'mcp.nope.search', 'tools.docs.search', 'mcp', 'search']) expect(source.get(name), name).to.equal(undefined);
  });

  it('a tool\'s handler calls it on its server with the arguments given', async () => {
    await new FlowStore(store()).saveTools('docs', [tool('search', { title: 'Search' })]);
    const registry = servers();
    await registry.sync({ docs: settings() });
    const def = registry.toolSource().get('mcp.docs.search')!;
    expect(def.description).to.equal('Search');
    expect(await def.handler({ q: 'x' }, {} as never)).to.deep.equal({ content: [{ type: 'text', text: 'called search' }] });
    expect(made.get('docs')!.calls.map(({ offered, args }) => [offered.name, args])).to.deep.equal([['mcp.docs.search', { q: 'x' }]]);
  });

  it('a changed secret of a server reads its credentials again and reconnects that server only', async () => {
    const registry = servers();
    await registry.sync({ docs: settings(), other: settings('https://other.example.com/mcp') });
    expect(await registry.find('docs').credentials.tokens()).to.equal(undefined);
    secrets.values.set('mcp.servers.docs.oauth', JSON.stringify({ access_token: 'set-outside', token_type: 'Bearer', receivedAt: 1 }));
    registry.secretChanged('mcp.servers.docs.oauth');
    registry.secretChanged('mcp.servers.gone.oauth');
    expect((await registry.find('docs').credentials.tokens())?.access_token).to.equal('set-outside');
    expect([made.get('docs')!.connects, made.get('other')!.connects]).to.deep.equal([1, 0]);
  });

  it('stops every server at shutdown, and connects none that is added after', async () => {
    const registry = servers();
    await registry.sync({ docs: settings() });
    registry.start();
    await registry.stop();
    expect(made.get('docs')!.stops).to.equal(1);
    await registry.sync({ docs: settings(), late: settings('https://late.example.com/mcp') });
    expect(made.get('late')!.connects).to.equal(0);
  });

  it('passes on a lost login with the server\'s name, and keeps the tools a server lists', async () => {
    const registry = servers();
    await registry.sync({ docs: settings() });
    const { made: deps } = made.get('docs')!;
    deps.onLoginLost('the server refused the stored credentials');
    expect(lost).to.deep.equal([['docs', 'the server refused the stored credentials']]);
    deps.saveTools([tool('fresh')]);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect((await new FlowStore(store()).savedTools('docs')).map((listed) => listed.name)).to.deep.equal(['fresh']);
    expect(deps.redirectUrl()).to.equal('http://127.0.0.1:1/oauth/mcp/callback');
    expect(deps.settings().url).to.equal('https://mcp.example.com/mcp');
  });

  it('gives the validator an object schema without the server\'s dialect marker', () => {
    expect(withoutDialect(undefined)).to.deep.equal({ type: 'object' });
    expect(withoutDialect({ $schema: 'x', type: 'object', required: ['a'] })).to.deep.equal({ type: 'object', required: ['a'] });
  });
});
