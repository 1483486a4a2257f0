import { expect } from 'chai';
import { McpCredentials } from '../../../src/server/mcp/credentials.ts';
import { FLOW_TTL_MS, FlowStore, LoginRequired, oauthProvider } from '../../../src/server/mcp/oauth.ts';
import type { SecretStore } from '../../../src/shared/secrets/secret-store.ts';
import { freshStore } from '../../support/store.ts';

/** A secret store in memory. */
const memorySecrets = (): SecretStore & { values: Map<string, string> } => {
  const values = new Map<string, string>();
  return {
    backend: 'file', location: 'memory', values,
    get: async (name) => values.get(name),
    set: async (name, value) => void values.set(name, value),
    delete: async (name) => values.delete(name),
    list: async () => [...values.keys()],
    clear: async () => values.clear(),
  };
};

const settings = { url: 'https://mcp.example.com/mcp', enabled: true, headers: [], timeoutMs: 60_000 };

describe('MCP login state', () => {
  const store = freshStore();
  let now = 1_000_000;
  const flows = () => new FlowStore(store(), () => now);

  it('takes a flow once, by its state, and never after ten minutes', async () => {
    const kept = flows();
    await kept.save({ state: 'state-a', server: 'docs', redirectUrl: 'http://127.0.0.1:1/oauth/mcp/callback', verifier: 'v'.repeat(43) });
    await kept.save({ state: 'state-b', server: 'docs', redirectUrl: 'http://127.0.0.1:1/oauth/mcp/callback', verifier: 'w'.repeat(43) });
    expect(await kept.take('state-a')).to.include({ server: 'docs', verifier: 'v'.repeat(43) });
    expect(await kept.take('state-a'), 'replayed').to.equal(undefined);
    expect(await kept.take('unknown')).to.equal(undefined);
    now += FLOW_TTL_MS + 1;
    expect(await kept.take('state-b'), 'expired').to.equal(undefined);
    // The state is kept hashed: the database never holds the value a browser carries.
    await kept.save({ state: 'state-c', server: 'docs', redirectUrl: 'x', verifier: 'v' });
    const rows = await store().all<{ state_hash: string }>('SELECT state_hash FROM mcp_oauth_flows');
    expect(rows.map((r) => r.state_hash)).to.not.include('state-c');
  });

  it('a provider without a login in progress refuses to send anyone to log in', async () => {
    const provider = oauthProvider({ credentials: new McpCredentials(memorySecrets(), 'docs'), settings: () => settings, redirectUrl: 'http://127.0.0.1:1/cb', clientName: 'gateway' });
    expect(() => provider.redirectToAuthorization(new URL('https://as.example.com/authorize'))).to.throw(LoginRequired);
  });

  it('a login in progress never drops the tokens held, whatever the authorization server says', async () => {
    const secrets = memorySecrets();
    const credentials = new McpCredentials(secrets, 'docs');
    await credentials.saveTokens({ access_token: 'held-access', token_type: 'Bearer', refresh_token: 'held-refresh', expires_in: 60 });
    const flow = { state: 's', server: 'docs', redirectUrl: 'http://127.0.0.1:1/cb', verifier: 'v' };
    const provider = oauthProvider({ credentials, settings: () => settings, redirectUrl: flow.redirectUrl, clientName: 'gateway', flow });
    await provider.invalidateCredentials!('tokens');
    await provider.invalidateCredentials!('all');
    expect((await credentials.tokens())?.access_token).to.equal('held-access');
    // Without a login in progress (a refused refresh), the tokens go.
    await oauthProvider({ credentials, settings: () => settings, redirectUrl: flow.redirectUrl, clientName: 'gateway' }).invalidateCredentials!('tokens');
    expect(await credentials.tokens()).to.equal(undefined);
    expect(secrets.values.has('mcp.servers.docs.oauth')).to.equal(false);
  });

  it('keeps the refresh token when a refresh answer leaves it out, and registers again for another callback address', async () => {
    const credentials = new McpCredentials(memorySecrets(), 'docs');
    await credentials.saveTokens({ access_token: 'a1', token_type: 'Bearer', refresh_token: 'r1', expires_in: 60 }, 1000);
    const kept = await credentials.saveTokens({ access_token: 'a2', token_type: 'Bearer', expires_in: 60 }, 2000);
    expect(kept).to.include({ refresh_token: 'r1', expiresAt: 62_000, receivedAt: 2000 });
    await credentials.saveClient({ client_id: 'c1', redirect_uris: ['http://127.0.0.1:1/cb'] });
    const same = oauthProvider({ credentials, settings: () => settings, redirectUrl: 'http://127.0.0.1:1/cb', clientName: 'gateway' });
    expect((await same.clientInformation())?.client_id).to.equal('c1');
    const moved = oauthProvider({ credentials, settings: () => settings, redirectUrl: 'https://gw.example.com/oauth/mcp/callback', clientName: 'gateway' });
    expect(await moved.clientInformation()).to.equal(undefined);
    const preRegistered = oauthProvider({ credentials, settings: () => ({ ...settings, clientId: 'registered' }), redirectUrl: 'x', clientName: 'gateway' });
    expect((await preRegistered.clientInformation())?.client_id).to.equal('registered');
  });
});
