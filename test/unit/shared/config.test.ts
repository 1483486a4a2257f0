import { expect } from 'chai';
import {
  assertKnownKey, deletePath, documentProblems, effectiveConfig, getPath, leafKeys, needsReload, needsRestart, parseValue, problemsOf, schemaAt, setPath,
} from '../../../src/shared/config/keys.ts';
import { exposureProblems, isLoopbackAddress, resolveBind } from '../../../src/shared/config/exposure.ts';

describe('config keys', () => {
  it('parses command-line values as JSON where they parse, else as text', () => {
    expect(parseValue('18800')).to.equal(18800);
    expect(parseValue('true')).to.equal(true);
    expect(parseValue('["a","b"]')).to.deep.equal(['a', 'b']);
    expect(parseValue('{"x":1}')).to.deep.equal({ x: 1 });
    expect(parseValue('lan')).to.equal('lan');
    expect(parseValue('127.0.0.1')).to.equal('127.0.0.1');
  });

  it('knows every setting of the gateway, including later features', () => {
    for (const key of [
      'gateway.port', 'gateway.bind', 'gateway.customBindHost', 'gateway.auth.mode', 'gateway.auth.allowOverlay',
      'gateway.auth.rateLimit.exemptLoopback', 'gateway.trustedProxies', 'gateway.overlay.mode', 'gateway.controlUi.basePath',
      'gateway.controlUi.allowedOrigins', 'gateway.http.endpoints.chatCompletions.enabled', 'gateway.http.endpoints.responses.enabled',
      'hooks.enabled', 'hooks.path', 'hooks.mappings', 'channels.irc.dmPolicy', 'channels.matrix.allowFrom', 'store.retentionDays',
      'store.synchronous', 'plugins.load', 'api.jwt.issuer', 'log.level',
    ]) {
      expect(schemaAt(key), key).to.not.equal(undefined);
    }
    expect(schemaAt('gateway.nope')).to.equal(undefined);
    expect(schemaAt('channels.Bad!.dmPolicy')).to.equal(undefined);
    expect(() => assertKnownKey('gateway..port')).to.throw(/Invalid configuration key/);
    expect(leafKeys()).to.include('gateway.auth.mode');
  });

  it('names the key in every problem', () => {
    expect(problemsOf('gateway.port', 'high')).to.deep.equal(['gateway.port: must be integer']);
    expect(problemsOf('gateway.port', 70000)[0]).to.match(/^gateway\.port: must be <= 65535/);
    expect(problemsOf('gateway.bind', 'everywhere')[0]).to.include('gateway.bind: must be one of "loopback"');
    expect(problemsOf('gateway.auth', { mode: 'token', extra: 1 })).to.deep.equal(['gateway.auth.extra: unknown key']);
    expect(problemsOf('gateway.customBindHost', '999.1.1.1')).to.not.be.empty;
    expect(problemsOf('gateway.customBindHost', '::1')).to.be.empty;
    // A key inside an entry with required keys (an MCP server's url) is checked alone; the entry itself still needs them.
    expect(problemsOf('mcp.servers.docs.timeoutMs', 5000)).to.deep.equal([]);
    expect(problemsOf('mcp.servers.docs.timeoutMs', 10)[0]).to.match(/^mcp\.servers\.docs\.timeoutMs: must be >= 1000/);
    expect(problemsOf('mcp.servers.docs', { timeoutMs: 5000 })).to.deep.equal(["mcp.servers.docs: must have required property 'url'"]);
    expect(documentProblems({ mcp: { servers: { docs: { timeoutMs: 5000 } } } })).to.deep.equal(["mcp.servers.docs: must have required property 'url'"]);
    expect(documentProblems({ gateway: { port: 'x' }, nope: 1 })).to.have.members(['gateway.port: must be integer', 'nope: unknown key']);
    expect(documentProblems({ channels: { irc: { dmPolicy: 'open', allowFrom: ['*'] } } })).to.be.empty;
  });

  it('fills defaults without inventing the port', () => {
    const config = effectiveConfig({ gateway: { bind: 'lan' } });
    expect(config.gateway.bind).to.equal('lan');
    expect(config.gateway.auth.mode).to.equal('token');
    expect(config.gateway.port).to.equal(undefined);
    expect(config.hooks.path).to.equal('/hooks');
    expect(config.store.retentionDays).to.equal(30);
    expect(effectiveConfig({ channels: { other: {} } }).channels.other).to.include({ dmPolicy: 'pairing' });
  });

  it('sets and deletes dotted paths, pruning empty containers', () => {
    const doc: Record<string, unknown> = {};
    setPath(doc, 'gateway.auth.mode', 'password');
    expect(getPath(doc, 'gateway.auth.mode')).to.equal('password');
    expect(deletePath(doc, 'gateway.auth.mode')).to.equal(true);
    expect(doc).to.deep.equal({});
    expect(deletePath(doc, 'gateway.port')).to.equal(false);
  });

  it('says which changes need a restart', () => {
    expect(needsRestart('gateway.port')).to.equal(true);
    expect(needsRestart('log.level')).to.equal(false);
    expect(needsRestart('metrics.enabled')).to.equal(false);
    expect(needsRestart('metrics.loopbackOpen')).to.equal(false);
    expect(needsRestart('channels.irc.dmPolicy')).to.equal(false);
    expect(needsRestart('channels.irc.allowFrom')).to.equal(false);
    expect(needsRestart('channels.irc.host')).to.equal(true);
    expect(needsRestart('plugins.load')).to.equal(false);
    expect(needsReload('plugins.load')).to.equal(true);
    expect(needsReload('gateway.tools.allow')).to.equal(false);
  });

  it('refuses an open DM policy without an explicit "*"', () => {
    expect(documentProblems({ channels: { irc: { dmPolicy: 'open' } } })[0]).to.match(/needs an explicit "\*" in channels\.irc\.allowFrom/);
    expect(documentProblems({ channels: { irc: { dmPolicy: 'open', allowFrom: ['*'] } } })).to.deep.equal([]);
    expect(problemsOf('channels.irc.dmPolicy', 'open'), 'one key alone is checked against the schema only').to.deep.equal([]);
  });

  it('refuses hook mappings that cannot act', () => {
    expect(documentProblems({ hooks: { mappings: [{ name: 'x', action: 'message', channel: 'irc', to: 'a' }] } })).to.deep.equal(['hooks.mappings.0 (x): a message mapping needs text']);
    expect(documentProblems({ hooks: { mappings: [{ name: 'y', action: 'message', text: 'hi', channel: 'irc' }] } })).to.deep.equal(['hooks.mappings.0 (y): channel and to go together']);
    expect(documentProblems({ hooks: { mappings: [{ name: 'z', action: 'job' }] } })).to.deep.equal([]);
  });
});

describe('exposure rules', () => {
  const config = (patch: Record<string, unknown> = {}) => effectiveConfig({ gateway: patch });

  it('resolves bind modes to one address, never a wildcard where a specific one was asked for', () => {
    expect(resolveBind('loopback', config())).to.deep.equal({ mode: 'loopback', host: '127.0.0.1', loopback: true });
    expect(resolveBind('lan', config())).to.include({ host: '0.0.0.0', loopback: false });
    expect(resolveBind('custom', config({ customBindHost: '127.0.0.1' }))).to.include({ host: '127.0.0.1', loopback: true });
    expect(() => resolveBind('custom', config())).to.throw(/customBindHost is not set/);
    expect(() => resolveBind('custom', config({ customBindHost: '192.0.2.77' }))).to.throw(/not an address of this host/);
    expect(['127.0.0.1', '0.0.0.0']).to.include(resolveBind('auto', config()).host);
  });

  it('refuses what would expose the gateway, naming the setting', () => {
    const lan = resolveBind('lan', config());
    const loop = resolveBind('loopback', config());
    expect(exposureProblems(config({ auth: { mode: 'none' } }), lan)[0]).to.include('gateway.auth.mode');
    expect(exposureProblems(config({ auth: { mode: 'none' } }), loop)).to.be.empty;
    expect(exposureProblems(config(), lan)).to.be.empty;
    expect(exposureProblems(config({ auth: { mode: 'trusted-proxy' } }), loop)[0]).to.include('gateway.trustedProxies');
    expect(exposureProblems(config({ auth: { mode: 'trusted-proxy' }, trustedProxies: ['10.0.0.1/32'] }), lan)).to.be.empty;
    expect(exposureProblems(config({ overlay: { mode: 'serve' } }), lan)[0]).to.include('needs gateway.bind loopback');
    expect(exposureProblems(config({ overlay: { mode: 'funnel' } }), loop)[0]).to.include('gateway.auth.mode password');
    expect(exposureProblems(config({ overlay: { mode: 'funnel' }, auth: { mode: 'password' } }), loop)).to.be.empty;
  });

  it('recognises loopback addresses', () => {
    for (const address of ['127.0.0.1', '127.9.9.9', '::1', '::ffff:127.0.0.1']) expect(isLoopbackAddress(address), address).to.equal(true);
    for (const address of ['10.0.0.1', '0.0.0.0', '::', '128.0.0.1']) expect(isLoopbackAddress(address), address).to.equal(false);
  });
});
