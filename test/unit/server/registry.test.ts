import { expect } from 'chai';
import { pino } from 'pino';
import { DomainError } from '../../../src/server/kernel/errors.ts';
import type { HttpRoute } from '../../../src/server/kernel/module.ts';
import { TableBuilder } from '../../../src/server/kernel/registry.ts';

const log = pino({ level: 'silent' });
const handler = () => undefined;
/** A table with what the gateway's own modules would hold: a method of the protocol, a job prefix, the IRC channel, reserved paths. */
const builder = () => {
  const b = new TableBuilder({
    reservedPaths: () => ['/hooks', '/tokens'],
    compileSchema: (schema) => { if (schema.type === 'nonsense') throw new Error('bad type'); },
  });
  const core = b.api('core', log, true);
  core.rpc.method({ name: 'status', handler: () => ({}) as never });
  core.jobs.handle('github.*', handler);
  core.channels.add({ id: 'irc', label: 'IRC', normalizePeer: (p) => p, create: handler as never });
  return b;
};
const route = (path: string, extra: Partial<HttpRoute> = {}): HttpRoute => ({ method: 'GET', path, auth: 'gateway', handler, ...extra });

describe('registration table', () => {
  it('finds exact routes first, then the deepest prefix route, with HEAD falling back to GET', () => {
    const b = builder();
    const api = b.api('a', log);
    api.http.route(route('/x/', { match: 'prefix' }));
    api.http.route(route('/x/y/', { match: 'prefix', method: '*' }));
    api.http.route(route('/x/y/z'));
    const { table } = b;
    expect(table.route('GET', '/x/y/z')!.entry.value.match).to.equal('exact');
    expect(table.route('GET', '/x/y/z/w')!.entry.value.path).to.equal('/x/y/');
    expect(table.route('POST', '/x/y/q')!.entry.value.path).to.equal('/x/y/');
    expect(table.route('HEAD', '/x/q')!.entry.value.path).to.equal('/x/');
    expect(table.route('POST', '/x/q')).to.equal(undefined);
    expect(table.route('GET', '/xy')).to.equal(undefined);
    expect(table.allowedMethods('/x/q')).to.deep.equal(['GET']);
  });

  it('matches :name segments, literal segments first, and says which methods a path has', () => {
    const b = builder();
    const api = b.api('core', log, true);
    api.http.route(route('/tokens', { method: 'POST', auth: { scope: 'tokens:write' } }));
    api.http.route(route('/tokens/:id', { method: 'DELETE', auth: { scope: 'tokens:write' } }));
    api.http.route(route('/tokens/mine', { auth: 'public' }));
    const { table } = b;
    expect(table.route('DELETE', '/tokens/tok_1')!.params).to.deep.equal({ id: 'tok_1' });
    expect(table.route('DELETE', '/tokens/a%20b')!.params).to.deep.equal({ id: 'a b' });
    expect(table.route('GET', '/tokens/mine')!.entry.value.auth).to.equal('public');
    expect(table.route('GET', '/tokens/tok_1')).to.equal(undefined);
    expect(table.allowedMethods('/tokens/tok_1')).to.deep.equal(['DELETE']);
    expect(table.allowedMethods('/tokens')).to.deep.equal(['POST']);
    expect(table.route('DELETE', '/tokens/tok_1/extra')).to.equal(undefined);
  });

  it('refuses conflicts naming both owners, and paths, names and ids the gateway keeps', () => {
    const b = builder();
    b.api('first', log).http.route(route('/shared', { auth: 'gateway' }));
    b.api('first', log).tools.add({ name: 't', description: '', handler });
    const second = b.api('second', log);
    expect(() => second.http.route(route('/shared', { auth: 'plugin' }))).to.throw(DomainError, /route GET \/shared \(exact\) of plugin second conflicts with the same route of plugin first \(auth gateway vs plugin\)/);
    expect(() => second.tools.add({ name: 't', description: '', handler })).to.throw(DomainError, /tool t of plugin second conflicts with the tool of plugin first/);
    expect(() => second.http.route(route('/tokens/mine'))).to.throw(DomainError, /overlaps a path the gateway serves/);
    expect(() => second.http.route(route('/hooks/x'))).to.throw(DomainError, /overlaps/);
    expect(() => second.http.route(route('/__gateway__/canvas/'))).to.throw(DomainError, /overlaps/);
    expect(() => second.http.route(route('/a/../tokens'))).to.throw(DomainError, /plain path/);
    expect(() => second.http.route(route('/open', { auth: 'public' }))).to.throw(DomainError, /auth must be gateway or plugin/);
    expect(() => second.rpc.method({ name: 'status', scope: 'operator.read', handler })).to.throw(DomainError, /gateway's own/);
    expect(() => second.rpc.method({ name: 'x', scope: 'root' as never, handler })).to.throw(DomainError, /operator scope/);
    expect(() => second.jobs.handle('github.push', handler)).to.throw(DomainError, /handled by the gateway/);
    expect(() => second.channels.add({ id: 'irc', label: '', normalizePeer: (p) => p, create: handler as never })).to.throw(DomainError, /built in/);
    expect(() => second.tools.add({ name: 'bad', description: '', inputSchema: { type: 'nonsense' }, handler })).to.throw(DomainError, /not a valid JSON Schema/);
    expect(() => second.ws.route({ path: '/', auth: 'plugin', handler })).to.throw(DomainError, /control plane/);
  });

  it('finds the handler of a job kind: its own, else the longest prefix', () => {
    const b = builder();
    b.api('core', log, true).jobs.handle('github.push', handler);
    expect(b.table.jobHandler('github.push')!.builtin).to.equal(true);
    expect(b.table.jobHandler('github.issues')).to.not.equal(undefined);
    expect(b.table.jobHandler('gitlab.push')).to.equal(undefined);
  });

  it('leaves built-in tools\' schemas to their first use', () => {
    const b = builder();
    b.api('core', log, true).tools.add({ name: 'trusted', description: '', inputSchema: { type: 'nonsense' }, handler });
    expect(b.table.tools.has('trusted')).to.equal(true);
  });

  it('undoes every registration of a plugin when one of them is refused', () => {
    const b = builder();
    b.api('first', log).tools.add({ name: 'taken', description: '', handler });
    expect(() => b.atomically(() => {
      const api = b.api('second', log);
      api.http.route(route('/mine/', { match: 'prefix' }));
      api.tools.add({ name: 'fine', description: '', handler });
      api.tools.add({ name: 'taken', description: '', handler });
    })).to.throw(DomainError);
    expect(b.table.route('GET', '/mine/x')).to.equal(undefined);
    expect(b.table.tools.has('fine')).to.equal(false);
    expect(b.table.registered.has('second')).to.equal(false);
    expect(b.table.tools.get('taken')!.owner).to.equal('first');
  });
});
