import { expect } from 'chai';
import { pino } from 'pino';
import { RegistrationError, TableBuilder, type HttpRoute } from '../../../src/server/plugins/registry.ts';

const log = pino({ level: 'silent' });
const handler = () => undefined;
const builder = () => new TableBuilder({
  reservedMethod: (name) => name === 'status',
  reservedJobKind: (kind) => kind.startsWith('github.'),
  reservedChannel: (id) => id === 'irc',
  reservedPaths: ['/hooks'],
  compileSchema: (schema) => { if (schema.type === 'nonsense') throw new Error('bad type'); },
});
const route = (path: string, extra: Partial<HttpRoute> = {}): HttpRoute => ({ method: 'GET', path, auth: 'gateway', handler, ...extra });

describe('plugin table', () => {
  it('finds exact routes first, then the deepest prefix route, with HEAD falling back to GET', () => {
    const b = builder();
    const api = b.api('a', log);
    api.http.route(route('/x/', { match: 'prefix' }));
    api.http.route(route('/x/y/', { match: 'prefix', method: '*' }));
    api.http.route(route('/x/y/z'));
    const { table } = b;
    expect(table.route('GET', '/x/y/z')!.value.match).to.equal('exact');
    expect(table.route('GET', '/x/y/z/w')!.value.path).to.equal('/x/y/');
    expect(table.route('POST', '/x/y/q')!.value.path).to.equal('/x/y/');
    expect(table.route('HEAD', '/x/q')!.value.path).to.equal('/x/');
    expect(table.route('POST', '/x/q')).to.equal(undefined);
    expect(table.route('GET', '/xy')).to.equal(undefined);
    expect(table.allowedMethods('/x/q')).to.deep.equal(['GET']);
  });

  it('refuses conflicts naming both plugins, and paths, names and ids the gateway keeps', () => {
    const b = builder();
    b.api('first', log).http.route(route('/shared', { auth: 'gateway' }));
    b.api('first', log).tools.add({ name: 't', description: '', handler });
    const second = b.api('second', log);
    expect(() => second.http.route(route('/shared', { auth: 'plugin' }))).to.throw(RegistrationError, /route GET \/shared \(exact\) of plugin second conflicts with the same route of plugin first \(auth gateway vs plugin\)/);
    expect(() => second.tools.add({ name: 't', description: '', handler })).to.throw(RegistrationError, /tool t of plugin second conflicts with the tool of plugin first/);
    expect(() => second.http.route(route('/tokens/mine'))).to.throw(RegistrationError, /overlaps a path the gateway serves/);
    expect(() => second.http.route(route('/hooks/x'))).to.throw(RegistrationError, /overlaps/);
    expect(() => second.http.route(route('/__gateway__/canvas/'))).to.throw(RegistrationError, /overlaps/);
    expect(() => second.http.route(route('/a/../tokens'))).to.throw(RegistrationError, /plain path/);
    expect(() => second.rpc.method({ name: 'status', scope: 'operator.read', handler })).to.throw(RegistrationError, /gateway's own/);
    expect(() => second.rpc.method({ name: 'x', scope: 'root' as never, handler })).to.throw(RegistrationError, /operator scope/);
    expect(() => second.jobs.handle('github.push', handler)).to.throw(RegistrationError, /handled by the gateway/);
    expect(() => second.channels.add({ id: 'irc', label: '', normalizePeer: (p) => p, create: handler as never })).to.throw(RegistrationError, /built in/);
    expect(() => second.tools.add({ name: 'bad', description: '', inputSchema: { type: 'nonsense' }, handler })).to.throw(RegistrationError, /not a valid JSON Schema/);
    expect(() => second.ws.route({ path: '/', auth: 'plugin', handler })).to.throw(RegistrationError, /control plane/);
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
    })).to.throw(RegistrationError);
    expect(b.table.route('GET', '/mine/x')).to.equal(undefined);
    expect(b.table.tools.has('fine')).to.equal(false);
    expect(b.table.registered.has('second')).to.equal(false);
    expect(b.table.tools.get('taken')!.plugin).to.equal('first');
  });
});
