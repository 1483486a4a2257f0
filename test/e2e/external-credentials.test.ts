import { expect } from 'chai';
import { createServer, type Server } from 'node:http';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { freePort, Home } from '../support/cli.ts';

describe('JWTs and the service key on the HTTP API (e2e)', function () {
  let home: Home;
  let base: string;
  const get = (path: string, bearer: string) => fetch(`${base}${path}`, { headers: { authorization: `Bearer ${bearer}` } });

  beforeEach(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    home = new Home({ GATEWAY_PORT: String(port) });
    expect((await home.run(['start'])).code).to.equal(0);
  });
  afterEach(() => home.cleanup());

  it('accepts the configured service key, with every scope', async () => {
    expect((await get('/jobs', 'service-key-0123456789')).status).to.equal(401);
    const set = await home.run(['secrets', 'set', 'api.serviceKey', '--json'], { input: 'service-key-0123456789' });
    expect(set.json.daemonNotified).to.equal(true);
    expect((await get('/jobs', 'service-key-0123456789')).status).to.equal(200);
    expect((await get('/jobs', 'service-key-0123456780')).status).to.equal(401);
  });

  it('accepts JWTs of the configured issuer (shared secret); the subject owns its tokens', async () => {
    const secret = 'jwt-shared-secret-for-tests-0123456789';
    await home.run(['config', 'set', 'api.jwt.issuer', 'https://issuer.test']);
    await home.run(['config', 'set', 'api.jwt.audience', 'gateway']);
    await home.run(['secrets', 'set', 'api.jwt.secret'], { input: secret });
    const key = new TextEncoder().encode(secret);
    const jwt = (claims: Record<string, unknown>, options: { issuer?: string; expires?: string } = {}) => new SignJWT(claims)
      .setProtectedHeader({ alg: 'HS256' }).setSubject('alice').setIssuer(options.issuer ?? 'https://issuer.test').setAudience('gateway')
      .setIssuedAt().setExpirationTime(options.expires ?? '5m').sign(key);

    const alice = await jwt({ scope: 'tokens:read tokens:write' });
    const created = await fetch(`${base}/tokens`, { method: 'POST', headers: { authorization: `Bearer ${alice}`, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'alice-ci', scopes: ['tokens:read'] }) });
    expect(created.status).to.equal(201);
    const { id } = await created.json() as { id: string };
    const mine = await (await get('/tokens', alice)).json() as { tokens: { id: string }[] };
    expect(mine.tokens.map((t) => t.id)).to.include(id);
    const gatewayList = await home.run(['tokens', 'list', '--json']);
    expect(gatewayList.json.tokens.map((t: { id: string }) => t.id)).to.not.include(id);

    const forbidden = await get('/jobs', alice);
    expect(forbidden.status).to.equal(403);
    const wrongIssuer = await get('/tokens', await jwt({ scope: 'tokens:read' }, { issuer: 'https://evil.test' }));
    expect(wrongIssuer.status).to.equal(401);
    expect(((await wrongIssuer.json()) as { message: string }).message).to.include('not for this gateway');
    const expired = await get('/tokens', await jwt({ scope: 'tokens:read' }, { expires: '-1m' }));
    expect(((await expired.json()) as { message: string }).message).to.equal('The JWT has expired.');
    const forged = await new SignJWT({ scope: 'tokens:read' }).setProtectedHeader({ alg: 'HS256' }).setSubject('alice').setIssuer('https://issuer.test')
      .setAudience('gateway').setExpirationTime('5m').sign(new TextEncoder().encode('another-secret-of-enough-length-000'));
    expect((await get('/tokens', forged)).status).to.equal(401);
  });

  it('verifies JWTs against the issuer\'s JWKS', async () => {
    const { publicKey, privateKey } = await generateKeyPair('ES256');
    const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES256', use: 'sig' };
    const jwksServer: Server = createServer((req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ keys: [jwk] }));
    });
    await new Promise<void>((resolve) => jwksServer.listen(0, '127.0.0.1', () => resolve()));
    try {
      const jwksUrl = `http://127.0.0.1:${(jwksServer.address() as { port: number }).port}/jwks.json`;
      await home.run(['config', 'set', 'api.jwt.issuer', 'https://issuer.test']);
      await home.run(['config', 'set', 'api.jwt.jwksUrl', jwksUrl]);
      const token = await new SignJWT({ scope: 'jobs:read' }).setProtectedHeader({ alg: 'ES256', kid: 'k1' }).setSubject('bob')
        .setIssuer('https://issuer.test').setExpirationTime('5m').sign(privateKey);
      expect((await get('/jobs', token)).status).to.equal(200);
      expect((await get('/tokens', token)).status).to.equal(403);
    } finally {
      jwksServer.close();
    }
  });
});
