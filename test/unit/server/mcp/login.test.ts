import { expect } from 'chai';
import { DomainError } from '../../../../src/server/kernel/errors.ts';
import { callbackInput, callbackUrl, McpLogins } from '../../../../src/server/mcp/login.ts';
import { FlowStore } from '../../../../src/server/mcp/oauth.ts';
import { loadMcpSdk, type McpSdk } from '../../../../src/server/mcp/sdk.ts';
import { McpServers } from '../../../../src/server/mcp/servers.ts';
import type { AuditFields } from '../../../../src/server/store/database.ts';
import { freshStore } from '../../../support/store.ts';
import { memorySecrets, RecordingConnection, settings, silent } from './parts.ts';

/** Rejects with the DomainError a promise fails with. */
const refusal = async (promise: Promise<unknown>): Promise<DomainError> => {
  try {
    await promise;
  } catch (error) {
    expect(error).to.be.instanceOf(DomainError);
    return error as DomainError;
  }
  throw new Error('expected a refusal');
};

describe('MCP login: the callback\'s input and address', () => {
  it('takes an object of strings, each bounded; empty values count as absent', () => {
    expect(callbackInput({ code: 'c', state: 's', iss: 'https://as', error: '', extra: 1 })).to.deep.equal({ code: 'c', state: 's', iss: 'https://as', error: undefined, error_description: undefined });
    const cut = callbackInput({ error: 'e'.repeat(500), error_description: 'd'.repeat(900), iss: 'i'.repeat(3000) });
    expect([cut.error!.length, cut.error_description!.length, cut.iss!.length]).to.deep.equal([128, 500, 2048]);
  });

  it('refuses what is not such an object, and a code or state too long to be one', () => {
    for (const raw of [null, 'code=c', ['c'], 42]) expect(() => callbackInput(raw), JSON.stringify(raw)).to.throw(DomainError, /must be an object/);
    expect(() => callbackInput({ state: 5 })).to.throw(DomainError, 'state must be a string.');
    expect(() => callbackInput({ code: 'c'.repeat(4097), state: 's' })).to.throw(DomainError, 'code is too long.');
    expect(() => callbackInput({ code: 'c', state: 's'.repeat(513) })).to.throw(DomainError, 'state is too long.');
  });

  it('sends the browser back to mcp.callbackUrl, else to the daemon, a wildcard bind as loopback', () => {
    expect(callbackUrl('https://gw.example.com/cb', 'http://127.0.0.1:4000')).to.equal('https://gw.example.com/cb');
    expect(callbackUrl(undefined, 'http://127.0.0.1:4000')).to.equal('http://127.0.0.1:4000/oauth/mcp/callback');
    expect(callbackUrl(undefined, 'http://0.0.0.0:4000')).to.equal('http://127.0.0.1:4000/oauth/mcp/callback');
    expect(callbackUrl(undefined, 'http://[::]:4000')).to.equal('http://127.0.0.1:4000/oauth/mcp/callback');
    expect(callbackUrl(undefined, 'http://gw.lan:4000/ui/')).to.equal('http://gw.lan:4000/oauth/mcp/callback');
  });
});

describe('MCP login: starting and finishing', () => {
  const store = freshStore();
  let sdk: McpSdk;
  let audits: [string, AuditFields][];
  let secrets: ReturnType<typeof memorySecrets>;
  let made: Map<string, RecordingConnection>;
  /** What the authorization server does when the SDK's auth() is called. */
  let authorize: (provider: Parameters<McpSdk['auth']>[0], options: Parameters<McpSdk['auth']>[1]) => Promise<'REDIRECT' | 'AUTHORIZED'>;
  let servers: McpServers;
  let flows: FlowStore;
  let logins: McpLogins;

  before(async () => {
    sdk = await loadMcpSdk();
  });
  beforeEach(async () => {
    audits = [];
    secrets = memorySecrets();
    made = new Map();
    flows = new FlowStore(store());
    servers = new McpServers({
      flows, secrets, log: silent, clientName: 'gateway (test)', version: '0', callbackUrl: () => 'http://127.0.0.1:9/oauth/mcp/callback',
      onChange: () => undefined, onLoginLost: () => undefined,
      connection: (deps) => {
        const connection = new RecordingConnection(deps);
        made.set(deps.name, connection);
        return connection;
      },
    });
    await servers.sync({ docs: settings() });
    authorize = async (provider) => {
      // As the SDK does for a fresh login: a verifier, then the browser sent away with the provider's state.
      await provider.saveCodeVerifier('verifier-1');
      await provider.redirectToAuthorization(new URL(`https://as.example.com/authorize?state=${await provider.state!()}`));
      return 'REDIRECT';
    };
    logins = new McpLogins({
      servers, flows, log: silent, clientName: 'gateway (test)', callbackUrl: () => 'http://127.0.0.1:9/oauth/mcp/callback',
      audit: async (kind, fields) => void audits.push([kind, fields]),
      sdk: async () => ({ ...sdk, auth: (provider, options) => authorize(provider, options) }) as McpSdk,
    });
  });

  const started = async () => {
    const { authorizationUrl } = await logins.start('docs');
    return new URL(authorizationUrl!).searchParams.get('state')!;
  };

  it('a login started keeps its flow by state and sends the browser to the authorization server', async () => {
    const state = await started();
    expect(state).to.have.length(43);
    const flow = await flows.take(state);
    expect(flow).to.include({ server: 'docs', verifier: 'verifier-1', redirectUrl: 'http://127.0.0.1:9/oauth/mcp/callback' });
  });

  it('a server connected without OAuth needs no login; one that answered "authorized" connects at once', async () => {
    const connection = made.get('docs')!;
    connection.info = async () => ({ name: 'docs', url: 'x', state: 'connected', tools: 0, auth: 'none' });
    expect(await logins.start('docs')).to.deep.equal({});
    expect(connection.connects).to.equal(0);
    connection.challenged = true;
    authorize = async () => 'AUTHORIZED';
    expect(await logins.start('docs')).to.deep.equal({});
    expect(connection.connects).to.equal(1);
    expect(await store().all('SELECT * FROM mcp_oauth_flows')).to.deep.equal([]);
  });

  it('finishes with the code: exchanged with the flow\'s verifier, audited, the server connected; the state works once', async () => {
    const state = await started();
    authorize = async (provider, options) => {
      expect(options).to.include({ authorizationCode: 'code-1', iss: 'https://as.example.com', serverUrl: 'https://mcp.example.com/mcp' });
      expect(await provider.codeVerifier()).to.equal('verifier-1');
      await provider.saveTokens({ access_token: 'fresh-access', token_type: 'Bearer' });
      return 'AUTHORIZED';
    };
    const info = await logins.finish({ state, code: 'code-1', iss: 'https://as.example.com' }, '127.0.0.1');
    expect(info).to.include({ name: 'docs', auth: 'oauth' });
    expect(made.get('docs')!.connects).to.equal(1);
    expect(audits).to.deep.equal([['mcp.login', { subject: 'docs', address: '127.0.0.1' }]]);
    expect((await refusal(logins.finish({ state, code: 'code-1' }, '127.0.0.1'))).code, 'replayed').to.equal('invalid_state');
  });

  it('refuses a response without a state, or with one it does not know', async () => {
    expect((await refusal(logins.finish({ code: 'c' }, 'a'))).code).to.equal('invalid_state');
    const unknown = await refusal(logins.finish({ state: 'never-issued', code: 'c' }, 'a'));
    expect(unknown.code).to.equal('invalid_state');
    expect(unknown.message).to.match(/gateway mcp login <server>/);
    expect(audits).to.deep.equal([]);
  });

  it('passes the authorization server\'s refusal on, its code cleaned and its description on one line, and audits it', async () => {
    const state = await started();
    const refused = await refusal(logins.finish({ state, error: 'access_denied<script>', error_description: 'the user\r\nsaid no' }, '10.0.0.2'));
    expect(refused.code).to.equal('access_deniedscript');
    expect(refused.message).to.equal('The authorization server answered access_deniedscript: the user said no.');
    expect(audits).to.deep.equal([['mcp.login.refused', { subject: 'docs', address: '10.0.0.2', detail: { error: 'access_deniedscript' } }]]);
    expect(made.get('docs')!.connects).to.equal(0);
  });

  it('refuses a response without a code, and one for a server no longer configured', async () => {
    const state = await started();
    expect((await refusal(logins.finish({ state }, 'a'))).code).to.equal('invalid_request');
    // Removing a server forgets the logins it had in progress.
    const other = await started();
    await servers.sync({});
    expect((await refusal(logins.finish({ state: other, code: 'c' }, 'a'))).code).to.equal('invalid_state');
    await flows.save({ state: 'ghost-state', server: 'ghost', redirectUrl: 'x', verifier: 'v' });
    expect((await refusal(logins.finish({ state: 'ghost-state', code: 'c' }, 'a'))).status).to.equal(404);
  });

  it('a failed exchange is audited with the reason the caller is given', async () => {
    const state = await started();
    authorize = async () => {
      throw new sdk.OAuthError('invalid_grant', 'code expired');
    };
    const failed = await refusal(logins.finish({ state, code: 'old' }, 'a'));
    expect(failed.code).to.equal('invalid_grant');
    expect(failed.message).to.equal('The login with MCP server docs failed: the authorization server answered invalid_grant: code expired.');
    expect(audits).to.deep.equal([['mcp.login.refused', { subject: 'docs', address: 'a', detail: { error: 'invalid_grant' } }]]);
  });

  it('an unknown server cannot start a login', async () => {
    expect((await refusal(logins.start('nope'))).status).to.equal(404);
  });

  it('says what went wrong without a secret: issuer mismatch, the server\'s OAuth error, or an upstream failure', async () => {
    const entry = servers.find('docs');
    await entry.credentials.saveTokens({ access_token: 'held-secret-token', token_type: 'Bearer' });
    const own = new DomainError('invalid', 'mine');
    expect(await logins.failure(sdk, own, 'Doing', entry)).to.equal(own);
    const mixup = await logins.failure(sdk, new sdk.IssuerMismatchError('authorization_response', 'https://a', 'https://b'), 'Doing', entry);
    expect(mixup.code).to.equal('issuer_mismatch');
    expect(mixup.message).to.not.include('https://b');
    const oauth = await logins.failure(sdk, new sdk.OAuthError('invalid client!', 'refused held-secret-token'), 'Doing', entry);
    expect([oauth.code, oauth.message]).to.deep.equal(['invalidclient', 'Doing: the authorization server answered invalidclient: refused [redacted].']);
    const upstream = await logins.failure(sdk, new Error('fetch failed with Bearer held-secret-token'), 'Doing', entry);
    expect([upstream.status, upstream.message]).to.deep.equal([502, 'Doing: fetch failed with Bearer [redacted].']);
  });
});
