import { expect } from 'chai';
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
