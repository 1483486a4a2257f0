import { expect } from 'chai';
import pino from 'pino';
import type { Principal } from '../../../../src/server/kernel/module.ts';
import { DomainError } from '../../../../src/server/kernel/errors.ts';
import type { AuditFields } from '../../../../src/server/store/database.ts';
import { GATEWAY_OWNER, TokenIssuer } from '../../../../src/server/tokens/issuer.ts';
import { listLimit } from '../../../../src/server/tokens/routes.ts';
import { TokenStore } from '../../../../src/server/tokens/token-store.ts';
import { freshStore } from '../../../support/store.ts';

const DAY = 86_400_000;
const gateway: Principal = { kind: 'gateway', subject: 'gateway', scopes: 'all' };

describe('tokens: who may make and revoke which token', () => {
  const store = freshStore();
  let now: number;
  let audits: [string, AuditFields][];
  let deleted: string[];
  let tokens: TokenStore;
  let issuer: TokenIssuer;
  beforeEach(() => {
    now = Date.parse('2026-06-01T00:00:00Z');
    audits = [];
    deleted = [];
    tokens = new TokenStore(store(), () => now);
    issuer = new TokenIssuer({
      tokens, log: pino({ level: 'silent' }), defaultExpiryDays: () => 30, now: () => now,
      audit: async (kind, fields) => void audits.push([kind, fields]),
      secrets: { delete: async (name) => { deleted.push(name); return true; } },
    });
  });

  /** The principal a token's bearer is. */
  const bearer = async (token: string) => (await issuer.verify(token)) as Principal;
  const refusal = (promise: Promise<unknown>) => promise.then(() => expect.fail('expected a refusal'), (error: unknown) => error as DomainError);

  it('a token\'s bearer is a principal with its scopes; an unknown value is none; an ended token says why', async () => {
    const made = await issuer.create(gateway, { name: 'ci', scopes: ['jobs:read'] }, '127.0.0.1');
    expect(await bearer(made.token)).to.deep.equal({ kind: 'token', subject: 'gateway', scopes: new Set(['jobs:read']), credentialId: `token:${made.id}` });
    expect(await issuer.verify('gw_not_a_token')).to.equal(undefined);
    const short = await issuer.create(gateway, { name: 'short', scopes: ['jobs:read'], expiresAt: new Date(now + 1000).toISOString() }, undefined);
    await issuer.revoke(gateway, made.id, undefined);
    now += 2000;
    expect(await issuer.verify(made.token)).to.equal('The token was revoked.');
    expect(await issuer.verify(short.token)).to.equal('The token has expired.');
  });

  it('a token grants only scopes its maker holds, and a token made with a token ends with it and says so in the audit', async () => {
    const parent = await issuer.create(gateway, { name: 'parent', scopes: ['tokens:write', 'jobs:read'], expiresAt: new Date(now + 2 * DAY).toISOString() }, '10.0.0.1');
    const holder = await bearer(parent.token);
    const stronger = await refusal(issuer.create(holder, { name: 'x', scopes: ['jobs:write'] }, undefined));
    expect([stronger.status, stronger.message]).to.deep.equal([400, 'A token cannot grant scopes its creator does not hold: jobs:write.']);
    const child = await issuer.create(holder, { name: 'child', scopes: ['jobs:read'] }, '10.0.0.2');
    expect(child.expiresAt, 'no longer than its parent').to.equal(parent.expiresAt);
    expect(audits.at(-1)).to.deep.equal(['token.created', { actor: 'gateway', subject: child.id, address: '10.0.0.2', detail: { name: 'child', scopes: ['jobs:read'], parent: parent.id } }]);
  });

  it('a token whose maker stopped working since it was checked is refused as an invalid credential', async () => {
    const parent = await issuer.create(gateway, { name: 'parent', scopes: ['tokens:write'] }, undefined);
    const holder = await bearer(parent.token);
    await issuer.revoke(gateway, parent.id, undefined);
    const refused = await refusal(issuer.create(holder, { name: 'late', scopes: ['tokens:write'] }, undefined));
    expect([refused.status, refused.message]).to.deep.equal([401, 'The token was revoked.']);
    expect(refused.headers).to.deep.equal({ 'www-authenticate': 'Bearer error="invalid_token"' });
  });

  it('revokes a token with every token made with it, auditing each, and only with every scope it holds', async () => {
    const parent = await issuer.create(gateway, { name: 'parent', scopes: ['tokens:write', 'jobs:read'] }, undefined);
    const holder = await bearer(parent.token);
    const child = await issuer.create(holder, { name: 'child', scopes: ['tokens:write'] }, undefined);
    const narrow = await bearer((await issuer.create(holder, { name: 'narrow', scopes: ['tokens:write'] }, undefined)).token);
    const forbidden = await refusal(issuer.revoke(narrow, parent.id, undefined));
    expect(forbidden.status).to.equal(403);
    expect(forbidden.message).to.match(/holds scopes this credential lacks: jobs:read/);
    audits = [];
    const revoked = await issuer.revoke(gateway, parent.id, '10.0.0.3');
    expect(revoked).to.include({ id: parent.id, alreadyRevoked: false, descendantsRevoked: 2 });
    expect(audits.map(([kind, fields]) => [kind, fields.subject, fields.detail])).to.deep.include.members([
      ['token.revoked', parent.id, { descendants: 2 }], ['token.revoked', child.id, { revokedWith: parent.id }],
    ]);
    expect(deleted).to.deep.equal([`tokens.saved.${parent.id}`]);
    audits = [];
    expect(await issuer.revoke(gateway, parent.id, undefined)).to.include({ alreadyRevoked: true });
    expect(audits, 'a second revocation changes nothing').to.deep.equal([]);
  });

  it('a caller revokes only its own tokens', async () => {
    const mine = await issuer.create(gateway, { name: 'mine', scopes: ['jobs:read'] }, undefined);
    const other: Principal = { kind: 'jwt', subject: 'someone', scopes: new Set(['tokens:write', 'jobs:read']) };
    expect((await refusal(issuer.revoke(other, mine.id, undefined))).message).to.equal(`No token ${mine.id} of yours.`);
  });

  it('the operator\'s tokens hold any scope and belong with the gateway credential\'s', async () => {
    const made = await issuer.createForOperator({ name: 'ops', scopes: ['admin'] }, { actor: 'device-1', address: '127.0.0.1' });
    expect((await tokens.list(GATEWAY_OWNER)).tokens.map((token) => token.id)).to.deep.equal([made.id]);
    expect(audits).to.deep.equal([['token.created', { actor: 'device-1', subject: made.id, address: '127.0.0.1', detail: { name: 'ops', scopes: ['admin'] } }]]);
    expect(await issuer.revokeForOperator(made.id, { actor: 'device-1', address: undefined })).to.include({ id: made.id });
    expect((await refusal(issuer.revokeForOperator('tok_nope', { actor: 'device-1', address: undefined }))).status).to.equal(404);
  });

  it('GET /tokens takes a limit from 1 to 1000 and nothing else', () => {
    expect(listLimit({})).to.equal(100);
    expect(listLimit({ limit: '1000' })).to.equal(1000);
    for (const limit of ['0', '1001', '1.5', 'ten', '00010000']) expect(() => listLimit({ limit }), limit).to.throw(DomainError, 'limit must be an integer from 1 to 1000.');
    expect(() => listLimit({ limit: ['1', '2'] })).to.throw(DomainError);
    expect(() => listLimit({ cursor: 'x' })).to.throw(DomainError, 'Unknown query parameters: cursor.');
  });
});
