import { expect } from 'chai';
import { parseTokenRequest, withinParent } from '../../../src/server/tokens/token-request.ts';
import { GatewayError } from '../../../src/shared/errors.ts';

describe('token requests: within the token that makes them', () => {
  const now = Date.parse('2026-06-01T00:00:00Z');
  const HOUR = 3_600_000;
  const parent = { id: 'tok_parent', expiresAt: now + HOUR };
  const parse = (body: unknown, grantable: (scope: string) => boolean = () => true) => parseTokenRequest(body, { defaultExpiryDays: 90, now, grantable });
  const refusal = (work: () => unknown): GatewayError => {
    try {
      work();
    } catch (error) {
      return error as GatewayError;
    }
    throw new Error('not refused');
  };

  it('says whether the caller named the expiry', async () => {
    expect(await parse({ name: 'x', scopes: ['jobs:read'] })).to.deep.equal({ name: 'x', scopes: ['jobs:read'], expiresAt: now + 90 * 86_400_000, expiryAsked: false });
    expect((await parse({ name: 'x', scopes: ['jobs:read'], expiresAt: '2026-06-02T00:00:00Z' })).expiryAsked).to.equal(true);
  });

  it('ends a token with its parent when no expiry was asked, and keeps one asked for within it', async () => {
    const unasked = await parse({ name: 'x', scopes: ['jobs:read'] });
    expect(withinParent(unasked, parent).expiresAt).to.equal(parent.expiresAt);
    const sooner = await parse({ name: 'x', scopes: ['jobs:read'], expiresAt: new Date(now + HOUR / 2).toISOString() });
    expect(withinParent(sooner, parent)).to.deep.equal(sooner);
    const same = await parse({ name: 'x', scopes: ['jobs:read'], expiresAt: new Date(parent.expiresAt).toISOString() });
    expect(withinParent(same, parent)).to.deep.equal(same);
    // A parent that outlives the default leaves the default alone.
    expect(withinParent(unasked, { id: 'tok_long', expiresAt: now + 365 * 86_400_000 })).to.deep.equal(unasked);
  });

  it('refuses an expiry asked for after the parent\'s, naming when the parent ends and what to ask instead', async () => {
    const later = await parse({ name: 'x', scopes: ['jobs:read'], expiresAt: '2999-01-01T00:00:00Z' });
    const error = refusal(() => withinParent(later, parent));
    expect(error.kind).to.equal('invalid');
    expect(error.message).to.include('2026-06-01T01:00:00.000Z').and.to.include('tok_parent').and.to.include('leave expiresAt out');
  });

  it('refuses scopes the creator does not hold, naming them', async () => {
    let error: GatewayError | undefined;
    await parse({ name: 'x', scopes: ['jobs:read', 'jobs:write', 'admin'] }, (scope) => scope === 'jobs:read').catch((caught: GatewayError) => { error = caught; });
    expect(error?.kind).to.equal('invalid');
    expect(error?.message).to.include('jobs:write, admin').and.not.include('jobs:read');
  });
});
