import { expect } from 'chai';
import { request } from 'node:http';
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

  describe('a token made with a token never outgrows it', () => {
    const HOUR = 3_600_000;
    /** A token the gateway credential makes (it has no parent), expiring in an hour unless told. */
    const root = async (name: string, scopes: string[], expiresInMs = HOUR) =>
      (await call('POST', '/tokens', gateway, { name, scopes, expiresAt: new Date(Date.now() + expiresInMs).toISOString() })).body as { id: string; token: string; expiresAt: string };
    const mint = (parent: string, body: Record<string, unknown>) => call('POST', '/tokens', parent, body);
    const listed = async (id: string) => ((await call('GET', '/tokens?limit=1000', gateway)).body.tokens as { id: string; parentId: string | null; revokedAt: string | null }[]).find((token) => token.id === id);

    it('ends with its parent: no expiry asked is capped to the parent\'s, a later one is refused naming it', async () => {
      const parent = await root('expiring parent', ['tokens:write', 'tokens:read']);
      const capped = await mint(parent.token, { name: 'child', scopes: ['tokens:read'] });
      expect(capped.status).to.equal(201);
      expect(capped.body.expiresAt, 'the answer shows the real expiry').to.equal(parent.expiresAt);
      expect(await listed(capped.body.id)).to.include({ parentId: parent.id, revokedAt: null });

      const later = await mint(parent.token, { name: 'forever', scopes: ['tokens:read'], expiresAt: '2999-01-01T00:00:00Z' });
      expect(later.status).to.equal(400);
      expect(later.body.error).to.equal('bad_request');
      expect(later.body.message).to.include(parent.expiresAt).and.to.include('expiresAt');
      expect(later.body.message).to.not.include(parent.token);

      const sooner = new Date(Date.parse(parent.expiresAt) - 60_000).toISOString();
      const asked = await mint(parent.token, { name: 'sooner', scopes: ['tokens:read'], expiresAt: sooner });
      expect(asked.status).to.equal(201);
      expect(asked.body.expiresAt).to.equal(sooner);
      const same = await mint(parent.token, { name: 'as long', scopes: ['tokens:read'], expiresAt: parent.expiresAt });
      expect(same.status).to.equal(201);

      // Tokens the operator makes have no parent and keep the default expiry.
      const operator = await call('POST', '/tokens', gateway, { name: 'operator', scopes: ['tokens:read'] });
      expect(Date.parse(operator.body.expiresAt) - Date.parse(operator.body.createdAt)).to.equal(90 * 86_400_000);
      expect((await listed(operator.body.id))?.parentId).to.equal(null);
    });

    it('holds no scope its parent lacks (400 naming it)', async () => {
      const parent = await root('narrow parent', ['tokens:write', 'jobs:read']);
      const wider = await mint(parent.token, { name: 'wider', scopes: ['jobs:read', 'jobs:write'] });
      expect(wider.status).to.equal(400);
      expect(wider.body.message).to.include('jobs:write');
      const child = await mint(parent.token, { name: 'child', scopes: ['tokens:write'] });
      expect(child.status).to.equal(201);
      const grandchild = await mint(child.body.token, { name: 'grandchild', scopes: ['jobs:read'] });
      expect(grandchild.status, 'not even one its grandparent holds').to.equal(400);
      expect(grandchild.body.message).to.include('jobs:read');
    });

    it('dies with its parent, and a grandchild with its grandparent, in the list and the audit log too', async () => {
      const parent = await root('parent', ['tokens:write', 'tokens:read']);
      const child = (await mint(parent.token, { name: 'child', scopes: ['tokens:write', 'tokens:read'] })).body;
      const grandchild = (await mint(child.token, { name: 'grandchild', scopes: ['tokens:read'] })).body;
      const sibling = (await mint(parent.token, { name: 'sibling', scopes: ['tokens:read'] })).body;
      const stranger = await root('stranger', ['tokens:read']);
      for (const token of [child, grandchild, sibling]) expect((await call('GET', '/tokens', token.token)).status).to.equal(200);

      // Revoking the child takes the grandchild, not the parent nor the sibling.
      const revokedChild = await call('DELETE', `/tokens/${child.id}`, gateway);
      expect(revokedChild.status).to.equal(200);
      expect(revokedChild.body).to.include({ id: child.id, alreadyRevoked: false, descendantsRevoked: 1 });
      const gone = await call('GET', '/tokens', grandchild.token);
      expect(gone.status).to.equal(401);
      expect(gone.body.message).to.equal('The token was revoked.');
      expect((await call('GET', '/tokens', parent.token)).status).to.equal(200);
      expect((await call('GET', '/tokens', sibling.token)).status).to.equal(200);

      // The operator's revoke (the CLI, over RPC) takes the whole family too.
      const cli = await home.json(['tokens', 'revoke', parent.id]);
      expect(cli).to.include({ id: parent.id, alreadyRevoked: false, descendantsRevoked: 1 });
      for (const token of [parent, child, grandchild, sibling]) expect((await call('GET', '/tokens', token.token)).status, token.id).to.equal(401);
      expect((await call('GET', '/tokens', stranger.token)).status).to.equal(200);
      for (const token of [child, grandchild, sibling]) expect((await listed(token.id))?.revokedAt, token.id).to.be.a('string');

      const { events } = await home.json(['audit', '--limit', '1000']) as { events: { kind: string; subject: string; detail?: Record<string, unknown> }[] };
      const revocation = (id: string) => events.find((event) => event.kind === 'token.revoked' && event.subject === id);
      expect(revocation(grandchild.id)?.detail).to.deep.equal({ revokedWith: child.id });
      expect(revocation(sibling.id)?.detail).to.deep.equal({ revokedWith: parent.id });
      expect(revocation(parent.id)?.detail).to.deep.equal({ descendants: 1 });
      expect(JSON.stringify(events)).to.not.include(grandchild.token);
    });

    it('expires with its parent', async () => {
      const parent = await root('short parent', ['tokens:write', 'tokens:read'], 2000);
      const child = (await mint(parent.token, { name: 'child', scopes: ['tokens:write', 'tokens:read'] })).body;
      const grandchild = (await mint(child.token, { name: 'grandchild', scopes: ['tokens:read'] })).body;
      expect(child.expiresAt).to.equal(parent.expiresAt);
      expect(grandchild.expiresAt).to.equal(parent.expiresAt);
      expect((await call('GET', '/tokens', grandchild.token)).status).to.equal(200);
      await new Promise((resolve) => setTimeout(resolve, Date.parse(parent.expiresAt) - Date.now() + 100));
      for (const token of [parent, child, grandchild]) {
        const refused = await call('GET', '/tokens', token.token);
        expect(refused.status).to.equal(401);
        expect(refused.body.message).to.equal('The token has expired.');
      }
    });

    it('revokes only tokens whose scopes it holds (403 naming what it lacks); the operator revokes any', async () => {
      const revoker = await root('revoker', ['tokens:write', 'tokens:read', 'jobs:read']);
      const wide = await root('wide', ['admin']);
      const wider = await root('wider', ['jobs:read', 'jobs:write', 'tokens:write']);
      const narrow = await root('narrow', ['jobs:read']);
      const refused = await call('DELETE', `/tokens/${wide.id}`, revoker.token);
      expect(refused.status).to.equal(403);
      expect(refused.body.error).to.equal('forbidden');
      expect(refused.body.message).to.include('admin');
      const partly = await call('DELETE', `/tokens/${wider.id}`, revoker.token);
      expect(partly.status).to.equal(403);
      expect(partly.body.message).to.include('jobs:write').and.not.include('tokens:write');
      for (const token of [wide, wider]) expect((await call('GET', '/jobs', token.token)).status, 'still in force').to.equal(200);

      const allowed = await call('DELETE', `/tokens/${narrow.id}`, revoker.token);
      expect(allowed.status).to.equal(200);
      expect((await call('GET', '/jobs', narrow.token)).status).to.equal(401);
      // An admin token holds every scope, and so may revoke any of its owner's tokens.
      expect((await call('DELETE', `/tokens/${wider.id}`, wide.token)).status).to.equal(200);
      expect((await home.run(['tokens', 'revoke', wide.id])).code).to.equal(0);
      expect((await call('GET', '/jobs', wide.token)).status).to.equal(401);
    });

    it('refuses a child whose request was let in before its parent was revoked and finished after', async () => {
      // The request's headers (and so its credential) are checked at once; its body comes after the revoke.
      const held = (bearer: string, body: unknown) => {
        const text = JSON.stringify(body);
        const req = request(`${base}/tokens`, {
          method: 'POST', headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)) },
        });
        const answer = new Promise<{ status: number; body: { token?: string; message?: string } }>((resolve, reject) => {
          req.on('response', (response) => {
            let data = '';
            response.setEncoding('utf8').on('data', (chunk: string) => { data += chunk; }).on('end', () => resolve({ status: response.statusCode!, body: JSON.parse(data) }));
          });
          req.on('error', reject);
        });
        req.write(text.slice(0, 2));
        return { finish: () => req.end(text.slice(2)), answer };
      };
      const parent = await root('held parent', ['tokens:write', 'tokens:read']);
      const child = (await mint(parent.token, { name: 'child', scopes: ['tokens:write', 'tokens:read'] })).body;
      const byParent = held(parent.token, { name: 'held child', scopes: ['tokens:read'] });
      const byChild = held(child.token, { name: 'held grandchild', scopes: ['tokens:read'] });
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect((await call('DELETE', `/tokens/${parent.id}`, gateway)).status).to.equal(200);
      byParent.finish();
      byChild.finish();
      for (const { answer } of [byParent, byChild]) {
        const made = await answer;
        expect(made.status, JSON.stringify(made.body)).to.equal(401);
        expect(made.body.message).to.equal('The token was revoked.');
      }
    });

    it('leaves no working child when its parent is revoked while children are being made', async () => {
      for (let round = 0; round < 3; round++) {
        const parent = await root(`racing parent ${round}`, ['tokens:write', 'tokens:read']);
        const first = await mint(parent.token, { name: 'first', scopes: ['tokens:write', 'tokens:read'] });
        expect(first.status).to.equal(201);
        const minted: string[] = [first.body.token];
        const refused: number[] = [];
        // Children and grandchildren made without pause by several callers, before, during and after the revoke.
        let revoked = false;
        const maker = async (index: number) => {
          for (let n = 0; ; n++) {
            const late = revoked;
            const made = await mint((index + n) % 2 ? parent.token : first.body.token, { name: `racer ${index}.${n}`, scopes: ['tokens:read'] });
            if (made.status === 201) minted.push(made.body.token);
            else refused.push(made.status);
            if (late) return;
          }
        };
        const makers = Array.from({ length: 6 }, (_, index) => maker(index));
        while (minted.length < 8 + round * 4) await new Promise((resolve) => setTimeout(resolve, 1));
        const revoke = await call('DELETE', `/tokens/${parent.id}`, gateway);
        revoked = true;
        expect(revoke.status).to.equal(200);
        await Promise.all(makers);
        expect(refused.length, 'the makers went on after the revoke').to.be.at.least(6);
        expect(refused.every((status) => status === 401), String(refused)).to.equal(true);
        for (const token of minted) expect((await call('GET', '/tokens', token)).status, 'a child of a revoked parent').to.equal(401);
      }
    });
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
