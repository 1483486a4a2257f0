import { expect } from 'chai';
import { GatewayError } from '../../../src/shared/errors.ts';
import type { TokenRequest } from '../../../src/server/tokens/token-request.ts';
import { TokenStore } from '../../../src/server/tokens/token-store.ts';
import { freshStore } from '../../support/store.ts';

describe('token store: a bounded list, those in force first, and retention', () => {
  const current = freshStore();
  let now: number;
  let tokens: TokenStore;
  const DAY = 86_400_000;
  beforeEach(() => {
    now = Date.parse('2026-06-01T00:00:00Z');
    tokens = new TokenStore(current(), () => now);
  });
  const make = async (name: string, expiresInDays = 30) => (await tokens.create('op', { name, scopes: ['jobs:read'], expiresAt: now + expiresInDays * DAY })).id;

  it('lists tokens in force first, then ended ones, each newest first, at most the limit, saying there are more', async () => {
    const old = await make('old active');
    now += 1000;
    const revoked = await make('revoked');
    await tokens.revoke('op', revoked);
    now += 1000;
    const expiring = await make('expires soon', 1);
    now += 1000;
    const newest = await make('newest active');
    now += 2 * DAY;
    const all = await tokens.list('op');
    expect(all.tokens.map((t) => t.id)).to.deep.equal([newest, old, expiring, revoked]);
    expect(all.more).to.equal(false);
    const two = await tokens.list('op', 2);
    expect(two.tokens.map((t) => t.id), 'a busy history of revoked tokens never hides one in force').to.deep.equal([newest, old]);
    expect(two.more).to.equal(true);
    expect((await tokens.list('someone else')).tokens).to.deep.equal([]);
  });

  it('forgets tokens revoked or expired longer ago than the retention, and keeps the rest', async () => {
    const revoked = await make('revoked');
    await tokens.revoke('op', revoked);
    const expired = await make('expired', 1);
    const active = await make('active', 365);
    now += 10 * DAY;
    expect(await tokens.prune(30 * DAY), 'nothing ended long enough ago').to.equal(0);
    now += 30 * DAY;
    expect(await tokens.prune(30 * DAY)).to.equal(2);
    expect((await tokens.list('op')).tokens.map((t) => t.id)).to.deep.equal([active]);
    expect(await tokens.get('op', expired)).to.equal(undefined);
  });
});

for (const engine of ['sqlite', 'postgres'] as const) describe(`token store: a token made with a token never outgrows it (${engine})`, () => {
  const current = freshStore(engine);
  let now: number;
  let tokens: TokenStore;
  const DAY = 86_400_000;
  beforeEach(() => {
    now = Date.parse('2026-06-01T00:00:00Z');
    tokens = new TokenStore(current(), () => now);
  });
  const request = (name: string, expiresAt = now + 90 * DAY, expiryAsked = false): TokenRequest => ({ name, scopes: ['jobs:read'], expiresAt, expiryAsked });
  const root = async (name: string, expiresInDays = 30) => tokens.create('op', { name, scopes: ['jobs:read', 'tokens:write'], expiresAt: now + expiresInDays * DAY });
  const child = async (parent: string, name: string) => {
    const made = await tokens.createChild('op', parent, request(name));
    if (!made.ok) throw new Error(`${name} was not made: ${made.reason}`);
    return made.token;
  };

  it('records the parent and ends with it; refuses an expiry after it and a parent no longer in force', async () => {
    const parent = await root('parent');
    const made = await child(parent.id, 'child');
    expect(made).to.include({ parentId: parent.id, expiresAt: parent.expiresAt });
    expect(parent.parentId).to.equal(null);
    const sooner = await tokens.createChild('op', parent.id, request('sooner', now + DAY, true));
    expect(sooner.ok && sooner.token.expiresAt).to.equal(new Date(now + DAY).toISOString());
    let refused: unknown;
    await tokens.createChild('op', parent.id, request('later', now + 31 * DAY, true)).catch((error: unknown) => { refused = error; });
    expect(refused).to.be.instanceOf(GatewayError);
    expect((refused as GatewayError).kind).to.equal('invalid');
    expect((await tokens.list('op')).tokens, 'nothing was made').to.have.length(3);

    expect(await tokens.createChild('someone else', parent.id, request('stranger'))).to.deep.equal({ ok: false, reason: 'unknown' });
    now += 30 * DAY;
    expect(await tokens.createChild('op', parent.id, request('too late'))).to.deep.equal({ ok: false, reason: 'expired' });
    const other = await root('other');
    await tokens.revoke('op', other.id);
    expect(await tokens.createChild('op', other.id, request('of a revoked one'))).to.deep.equal({ ok: false, reason: 'revoked' });
  });

  it('revokes a token with its descendants, in one go, and nothing else', async () => {
    const grandparent = await root('grandparent');
    const parent = await child(grandparent.id, 'parent');
    const [a, b] = [await child(parent.id, 'a'), await child(parent.id, 'b')];
    const greatGrandchild = await child(a.id, 'great-grandchild');
    const uncle = await child(grandparent.id, 'uncle');
    const stranger = await root('stranger');

    now += 1000;
    const revoked = await tokens.revoke('op', parent.id);
    expect(revoked?.alreadyRevoked).to.equal(false);
    expect(revoked?.descendants).to.have.members([a.id, b.id, greatGrandchild.id]);
    for (const token of [parent, a, b, greatGrandchild]) {
      expect((await tokens.check(token.token)).ok, token.name).to.equal(false);
      expect((await tokens.get('op', token.id))?.revokedAt).to.equal(new Date(now).toISOString());
    }
    for (const token of [grandparent, uncle, stranger]) expect((await tokens.check(token.token)).ok, token.name).to.equal(true);
    expect(await tokens.revoke('op', parent.id)).to.include({ alreadyRevoked: true }).and.to.have.property('descendants').that.deep.equals([]);
    expect(await tokens.revoke('someone else', grandparent.id)).to.equal(undefined);
    expect((await tokens.check(grandparent.token)).ok).to.equal(true);
  });

  it('leaves no child of a revoked parent in force, however the two interleave', async () => {
    for (let round = 0; round < 5; round++) {
      const parent = await root(`parent ${round}`);
      const first = await child(parent.id, 'first');
      // Children and grandchildren asked for all at once, with the revoke among them.
      const asks = Array.from({ length: 16 }, (_, index) => tokens.createChild('op', index % 2 ? parent.id : first.id, request(`child ${index}`)));
      const revoke = tokens.revoke('op', parent.id);
      const later = Array.from({ length: 8 }, (_, index) => tokens.createChild('op', index % 2 ? parent.id : first.id, request(`later ${index}`)));
      const made = await Promise.all([...asks, ...later]);
      expect((await revoke)?.alreadyRevoked).to.equal(false);
      for (const outcome of made) {
        if (outcome.ok) expect((await tokens.check(outcome.token.token)).ok, outcome.token.name).to.equal(false);
        else expect(outcome.reason).to.equal('revoked');
      }
    }
  });
});
