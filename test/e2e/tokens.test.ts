import { expect } from 'chai';
import { isWellFormedAccessToken } from '../../src/shared/api/access-token.ts';
import { freePort, Home } from '../support/cli.ts';

describe('product access tokens (e2e)', function () {
  let home: Home;
  let base: string;
  let gateway: string;
  const call = async (method: string, path: string, bearer: string | undefined, body?: unknown, headers: Record<string, string> = {}) => {
    const response = await fetch(`${base}${path}`, {
      method,
      headers: { ...(bearer ? { authorization: `Bearer ${bearer}` } : {}), ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : undefined };
  };

  before(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    home = new Home({ GATEWAY_PORT: String(port) });
    expect((await home.run(['start'])).code).to.equal(0);
    gateway = home.token();
  });
  after(() => home.cleanup());

  it('creates a token once, in a recognisable, checkable format, storing only its hash', async () => {
    const created = await call('POST', '/tokens', gateway, { name: 'ci', scopes: ['tokens:read'] });
    expect(created.status).to.equal(201);
    expect(created.body).to.have.all.keys('id', 'name', 'scopes', 'createdAt', 'expiresAt', 'token');
    expect(created.body.token).to.match(/^gwt_[0-9A-Za-z]{36}$/);
    expect(isWellFormedAccessToken(created.body.token)).to.equal(true);
    expect(isWellFormedAccessToken(`${created.body.token.slice(0, -1)}${created.body.token.endsWith('a') ? 'b' : 'a'}`)).to.equal(false);
    // The default expiry is 90 days.
    expect(Date.parse(created.body.expiresAt) - Date.parse(created.body.createdAt)).to.equal(90 * 86_400_000);
    const state = home.stateText();
    expect(state).to.include(created.body.id);
    expect(state).to.not.include(created.body.token);

    const listed = await call('GET', '/tokens', created.body.token);
    expect(listed.status).to.equal(200);
    const mine = listed.body.tokens.find((token: { id: string }) => token.id === created.body.id);
    expect(mine).to.include({ name: 'ci', masked: `gwt_…${created.body.token.slice(-4)}`, revokedAt: null });
    expect(mine.lastUsedAt).to.be.a('string');
    expect(JSON.stringify(listed.body)).to.not.include(created.body.token);
  });

  it('enforces scopes (403 naming the scope), expiry and revocation (401), and ownership (404)', async () => {
    const reader = (await call('POST', '/tokens', gateway, { name: 'reader', scopes: ['tokens:read'] })).body;
    const denied = await call('POST', '/tokens', reader.token, { name: 'x', scopes: ['tokens:read'] });
    expect(denied.status).to.equal(403);
    expect(denied.body).to.deep.equal({ error: 'forbidden', message: 'This route needs the scope tokens:write.', statusCode: 403 });

    const writer = (await call('POST', '/tokens', gateway, { name: 'writer', scopes: ['tokens:write', 'tokens:read'] })).body;
    const escalate = await call('POST', '/tokens', writer.token, { name: 'x', scopes: ['admin'] });
    expect(escalate.status).to.equal(400);
    expect(escalate.body.message).to.include('admin');
    // A token creates tokens for its own owner, within its own scopes.
    const own = (await call('POST', '/tokens', writer.token, { name: 'child', scopes: ['tokens:read'] })).body;
    expect((await call('GET', '/tokens', own.token)).status).to.equal(200);

    const short = (await call('POST', '/tokens', gateway, { name: 'short', scopes: ['tokens:read'], expiresAt: new Date(Date.now() + 1500).toISOString() })).body;
    expect((await call('GET', '/tokens', short.token)).status).to.equal(200);
    await new Promise((resolve) => setTimeout(resolve, 1600));
    const expired = await call('GET', '/tokens', short.token);
    expect(expired.status).to.equal(401);
    expect(expired.body.message).to.equal('The token has expired.');

    const revoke = await call('DELETE', `/tokens/${reader.id}`, gateway);
    expect(revoke.status).to.equal(200);
    expect(revoke.body.id).to.equal(reader.id);
    expect(revoke.body.revokedAt).to.be.a('string');
    const revoked = await call('GET', '/tokens', reader.token);
    expect(revoked.status).to.equal(401);
    expect(revoked.body.message).to.equal('The token was revoked.');
    for (const id of ['tok_doesnotexist', '1', '..%2f', 'x'.repeat(300)]) {
      const missing = await call('DELETE', `/tokens/${id}`, gateway);
      expect(missing.status, id).to.equal(404);
      expect(missing.body.error).to.equal('not_found');
    }
    const unknown = await call('GET', '/tokens', 'gwt_000000000000000000000000000000000000');
    expect(unknown.status).to.equal(401);
    expect((await call('GET', '/tokens', undefined)).status).to.equal(401);
  });

  it('keeps one owner\'s tokens from another', async () => {
    const port = await freePort();
    const other = new Home({ GATEWAY_PORT: String(port) });
    try {
      await other.run(['config', 'set', 'gateway.auth.mode', 'trusted-proxy']);
      await other.run(['config', 'set', 'gateway.trustedProxies', '["127.0.0.1/32"]']);
      expect((await other.run(['start'])).code).to.equal(0);
      const as = (user: string, method: string, path: string, body?: unknown) => fetch(`http://127.0.0.1:${port}${path}`, {
        method, headers: { 'x-forwarded-user': user, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body),
      });
      const alice = await (await as('alice', 'POST', '/tokens', { name: 'alice-ci', scopes: ['tokens:read'] })).json() as { id: string; token: string };
      const bobs = await (await as('bob', 'GET', '/tokens')).json() as { tokens: { id: string }[] };
      expect(bobs.tokens.map((t) => t.id)).to.not.include(alice.id);
      expect((await as('bob', 'DELETE', `/tokens/${alice.id}`)).status).to.equal(404);
      // Alice's token acts as Alice: it sees her tokens.
      const viaToken = await fetch(`http://127.0.0.1:${port}/tokens`, { headers: { authorization: `Bearer ${alice.token}` } });
      expect(((await viaToken.json()) as { tokens: { id: string }[] }).tokens.map((t) => t.id)).to.include(alice.id);
      expect((await as('alice', 'DELETE', `/tokens/${alice.id}`)).status).to.equal(200);
    } finally {
      other.cleanup();
    }
  });

  it('rejects bad requests with 400, 413 and 415, and query-string tokens', async () => {
    const cases: [unknown, string][] = [
      [{ name: '', scopes: ['tokens:read'] }, 'name'],
      [{ name: 'x', scopes: [] }, 'scopes'],
      [{ name: 'x', scopes: ['jobs:delete'] }, 'Unknown scopes'],
      [{ name: 'x', scopes: ['tokens:read'], expiresAt: '2001-01-01T00:00:00Z' }, 'past'],
      [{ name: 'x', scopes: ['tokens:read'], expiresAt: 'next tuesday' }, 'ISO 8601'],
      [{ name: 'x', scopes: ['tokens:read'], owner: 'someone' }, 'Unknown fields'],
      [[1, 2], 'JSON object'],
      ['{"name":', 'not valid JSON'],
    ];
    for (const [body, fragment] of cases) {
      const response = await call('POST', '/tokens', gateway, body);
      expect(response.status, JSON.stringify(body)).to.equal(400);
      expect(response.body.error).to.equal('bad_request');
      expect(response.body.message).to.include(fragment);
    }
    const form = await call('POST', '/tokens', gateway, 'name=x', { 'content-type': 'application/x-www-form-urlencoded' });
    expect(form.status).to.equal(415);
    expect(form.body.error).to.equal('unsupported_media_type');
    const big = await call('POST', '/tokens', gateway, { name: 'x'.repeat(2 * 1024 * 1024), scopes: ['tokens:read'] });
    expect(big.status).to.equal(413);
    expect(big.body.error).to.equal('payload_too_large');
    const query = await fetch(`${base}/tokens?access_token=${gateway}`);
    expect(query.status).to.equal(400);
    for (const asked of ['limit=0', 'limit=1001', 'limit=ten', 'limit=1&limit=2', 'owner=someone']) {
      const listed = await call('GET', `/tokens?${asked}`, gateway);
      expect(listed.status, asked).to.equal(400);
      expect(listed.body.error).to.equal('bad_request');
    }
    await call('POST', '/tokens', gateway, { name: 'one', scopes: ['tokens:read'] });
    await call('POST', '/tokens', gateway, { name: 'two', scopes: ['tokens:read'] });
    const page = await call('GET', '/tokens?limit=1', gateway);
    expect(page.status).to.equal(200);
    expect(page.body.tokens).to.have.length(1);
    expect(page.body.more).to.equal(true);
  });

  it('creates, lists, saves and revokes tokens from the CLI', async () => {
    const created = await home.run(['tokens', 'create', '--name', 'deploy', '--scope', 'jobs:read', '--scope', 'tokens:read', '--expires-in', '30d', '--save', '--json']);
    expect(created.code, created.stderr).to.equal(0);
    expect(created.json).to.include({ name: 'deploy' });
    expect(created.json.scopes).to.deep.equal(['jobs:read', 'tokens:read']);
    expect(Date.parse(created.json.expiresAt) - Date.now()).to.be.closeTo(30 * 86_400_000, 60_000);
    const secrets = home.secrets();
    expect(Object.values(secrets)).to.include(created.json.token);
    expect((await call('GET', '/tokens', created.json.token)).status).to.equal(200);

    const list = await home.run(['tokens', 'list', '--json']);
    expect(list.json.tokens.map((t: { id: string }) => t.id)).to.include(created.json.id);
    expect(list.stdout).to.not.include(created.json.token);
    const human = await home.run(['tokens', 'list']);
    expect(human.stdout).to.include('deploy').and.to.include('active');

    expect((await home.run(['tokens', 'revoke', created.json.id])).code).to.equal(0);
    expect((await call('GET', '/tokens', created.json.token)).status).to.equal(401);
    const missing = await home.run(['tokens', 'revoke', 'tok_nope', '--json']);
    expect(missing.code).to.equal(5);
    const badScope = await home.run(['tokens', 'create', '--name', 'x', '--scope', 'everything']);
    expect(badScope.code).to.equal(2);
    const past = await home.run(['tokens', 'create', '--name', 'x', '--scope', 'jobs:read', '--expires-at', '2001-01-01T00:00:00Z', '--json']);
    expect(past.code).to.equal(2);
    expect(past.json.error.message).to.include('past');
  });
});
