import { createHash, randomBytes } from 'node:crypto';
import { generateAccessToken, isWellFormedAccessToken, maskAccessToken } from '../../shared/api/access-token.ts';
import type { AccessTokenView } from '../../shared/protocol/results.ts';
import type { Db, Store, Tx } from '../store/database.ts';
import type { Migration } from '../store/migrations.ts';
import { pruneRows } from '../store/retention.ts';
import { withinParent, type TokenRequest } from './token-request.ts';

/** Tokens a list holds unless asked for more (at most 1,000). */
export const TOKEN_LIST_LIMIT = 100;

/** What a token is made of, as asked. */
export interface TokenInput {
  name: string;
  scopes: string[];
  expiresAt: number;
  budget?: { daily?: number; monthly?: number };
}

/** A token as its owner sees it (never the value). */
export type AccessToken = AccessTokenView;

export interface VerifiedToken {
  id: string;
  owner: string;
  scopes: string[];
}

export type TokenCheck = { ok: true; token: VerifiedToken } | { ok: false; reason: 'unknown' | 'expired' | 'revoked' };

export type CreatedToken = AccessToken & { token: string };

export interface Revoked {
  token: AccessToken;
  /** The token had been revoked before; nothing changed. */
  alreadyRevoked: boolean;
  /** Tokens made with it, directly or not, revoked with it now. */
  descendants: string[];
}

const hash = (value: string): string => createHash('sha256').update(value).digest('hex');
const iso = (ms: unknown) => (ms === null || ms === undefined ? null : new Date(Number(ms)).toISOString());
/** last_used_at is written at most this often per token, not on every request. */
const LAST_USED_RESOLUTION_MS = 60_000;

type Row = Record<string, unknown>;

const view = (row: Row): AccessToken => ({
  id: String(row.id),
  name: String(row.name),
  scopes: JSON.parse(String(row.scopes)) as string[],
  createdAt: iso(row.created_at)!,
  expiresAt: iso(row.expires_at)!,
  lastUsedAt: iso(row.last_used_at),
  revokedAt: iso(row.revoked_at),
  parentId: row.parent_id === null || row.parent_id === undefined ? null : String(row.parent_id),
  masked: maskAccessToken(`x${String(row.last_four)}`),
  budget: row.budget_daily === null && row.budget_monthly === null || (row.budget_daily === undefined && row.budget_monthly === undefined) ? null : {
    ...(row.budget_daily === null || row.budget_daily === undefined ? {} : { daily: Number(row.budget_daily) }),
    ...(row.budget_monthly === null || row.budget_monthly === undefined ? {} : { monthly: Number(row.budget_monthly) }),
  },
});

export const TOKEN_MIGRATIONS: readonly Migration[] = [{
  version: 1,
  name: 'product access tokens',
  was: { schema: 3 },
  sql: `
    CREATE TABLE access_tokens (
      id TEXT PRIMARY KEY,
      owner TEXT NOT NULL,
      name TEXT NOT NULL,
      scopes TEXT NOT NULL,
      token_hash TEXT NOT NULL UNIQUE,
      last_four TEXT NOT NULL,
      created_at BIGINT NOT NULL,
      expires_at BIGINT NOT NULL,
      last_used_at BIGINT,
      revoked_at BIGINT
    );
    CREATE INDEX access_tokens_owner ON access_tokens (owner, created_at);
  `,
}, {
  version: 2,
  name: 'the token each token was made with',
  // Null for a token the operator made, and for every token made before this version (their parents were not recorded).
  sql: `
    ALTER TABLE access_tokens ADD COLUMN parent_id TEXT;
    CREATE INDEX access_tokens_parent ON access_tokens (parent_id);
  `,
}, {
  version: 3,
  name: 'a cap on what each token spends',
  sql: `
    ALTER TABLE access_tokens ADD COLUMN budget_daily DOUBLE PRECISION;
    ALTER TABLE access_tokens ADD COLUMN budget_monthly DOUBLE PRECISION;
  `,
}];

/** A token, and each token it was made with, up to the operator's: the caps its spending falls under. */
const ANCESTORS = `WITH RECURSIVE line (id, parent_id, budget_daily, budget_monthly, depth) AS (
    SELECT id, parent_id, budget_daily, budget_monthly, 0 FROM access_tokens WHERE id = ?
    UNION ALL
    SELECT t.id, t.parent_id, t.budget_daily, t.budget_monthly, l.depth + 1 FROM access_tokens t JOIN line l ON t.id = l.parent_id WHERE l.depth < 64
  )
  SELECT id, budget_daily, budget_monthly FROM line`;

/** A token and every token made with it, directly or not. */
const FAMILY = `WITH RECURSIVE family (id) AS (
    SELECT id FROM access_tokens WHERE id = ?
    UNION ALL
    SELECT t.id FROM access_tokens t JOIN family f ON t.parent_id = f.id
  )
  SELECT id FROM family`;

/**
 * A token's descendants still in force, revoked: those made with it, those
 * made with them, and so on. Parameters: the token's id, the time.
 */
const REVOKE_DESCENDANTS = `WITH RECURSIVE family (id) AS (
    SELECT id FROM access_tokens WHERE parent_id = ?
    UNION ALL
    SELECT t.id FROM access_tokens t JOIN family f ON t.parent_id = f.id
  )
  UPDATE access_tokens SET revoked_at = ? WHERE id IN (SELECT id FROM family) AND revoked_at IS NULL RETURNING id`;

/**
 * Making a token with a token and revoking a token take turns within one
 * owner (a family never spans owners), so a revoke finds every child
 * committed before it and a child made after it finds its parent revoked:
 * no child of a revoked token slips between the two. SQLite's one writer
 * makes transactions take turns already; PostgreSQL's run side by side, so
 * there they take the owner's advisory lock until they end.
 */
function takeTurn(tx: Tx, owner: string): Promise<void> {
  return tx.dialect.takeTurn(tx, `gateway.tokens ${owner}`);
}

/** Product access tokens: only a SHA-256 hash of each is stored. */
export class TokenStore {
  private readonly store: Store;
  private readonly now: () => number;

  constructor(store: Store, now: () => number = Date.now) {
    this.store = store;
    this.now = now;
  }

  /** Creates a token with no parent (the operator's); the value is returned here once and never again. */
  create(owner: string, input: TokenInput, createdAt = this.now()): Promise<CreatedToken> {
    return this.insert(this.store, owner, input, createdAt, null);
  }

  /**
   * Creates a token with one of the owner's tokens (its parent), which it
   * records: its expiry is fitted within the parent's (withinParent), and it
   * is made only while the parent is in force, checked in the same
   * transaction. The caller has checked the scopes against the parent's.
   */
  async createChild(owner: string, parentId: string, request: TokenRequest, createdAt = this.now()): Promise<
    { ok: true; token: CreatedToken } | { ok: false; reason: 'unknown' | 'expired' | 'revoked' }
  > {
    return this.store.transaction(async (tx) => {
      await takeTurn(tx, owner);
      const parent = await tx.get('SELECT expires_at, revoked_at FROM access_tokens WHERE id = ? AND owner = ?', parentId, owner);
      if (!parent) return { ok: false, reason: 'unknown' };
      if (parent.revoked_at !== null) return { ok: false, reason: 'revoked' };
      if (Number(parent.expires_at) <= createdAt) return { ok: false, reason: 'expired' };
      const input = withinParent(request, { id: parentId, expiresAt: Number(parent.expires_at) });
      return { ok: true, token: await this.insert(tx, owner, input, createdAt, parentId) };
    });
  }

  private async insert(db: Db, owner: string, input: TokenInput, createdAt: number, parent: string | null): Promise<CreatedToken> {
    const token = generateAccessToken();
    const id = `tok_${randomBytes(9).toString('base64url')}`;
    const scopes = [...new Set(input.scopes)].sort();
    await db.run(`INSERT INTO access_tokens (id, owner, name, scopes, token_hash, last_four, created_at, expires_at, parent_id, budget_daily, budget_monthly)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, id, owner, input.name, JSON.stringify(scopes), hash(token), token.slice(-4), createdAt, input.expiresAt, parent,
    input.budget?.daily ?? null, input.budget?.monthly ?? null);
    return { ...(await this.get(owner, id, db))!, token };
  }

  /**
   * The caps a token's spending falls under: its own budget and that of each
   * token it was made with, each over the spending of that token's whole
   * family (so minting tokens never buys more to spend).
   */
  async capsOf(id: string): Promise<{ id: string; budget: { daily?: number; monthly?: number }; family: string[] }[]> {
    const line = await this.store.all(ANCESTORS, id);
    const caps = [];
    for (const row of line) {
      if ((row.budget_daily === null || row.budget_daily === undefined) && (row.budget_monthly === null || row.budget_monthly === undefined)) continue;
      const family = (await this.store.all(FAMILY, String(row.id))).map((member) => String(member.id));
      caps.push({
        id: String(row.id), family,
        budget: { ...(row.budget_daily === null ? {} : { daily: Number(row.budget_daily) }), ...(row.budget_monthly === null ? {} : { monthly: Number(row.budget_monthly) }) },
      });
    }
    return caps;
  }

  async get(owner: string, id: string, db: Db = this.store): Promise<AccessToken | undefined> {
    const row = await db.get('SELECT * FROM access_tokens WHERE id = ? AND owner = ?', id, owner);
    return row ? view(row) : undefined;
  }

  /**
   * The owner's tokens, those still in force first, then the revoked and
   * expired ones kept until retention, each newest first: at most `limit`,
   * and whether there are more.
   */
  async list(owner: string, limit = TOKEN_LIST_LIMIT): Promise<{ tokens: AccessToken[]; more: boolean }> {
    const rows = await this.store.all(`SELECT * FROM access_tokens WHERE owner = ?
      ORDER BY CASE WHEN revoked_at IS NULL AND expires_at > ? THEN 0 ELSE 1 END, created_at DESC, id LIMIT ?`, owner, this.now(), limit + 1);
    return { tokens: rows.slice(0, limit).map(view), more: rows.length > limit };
  }

  /** Forgets tokens revoked or expired more than `retentionMs` ago (they admit no one); returns how many. */
  async prune(retentionMs: number): Promise<number> {
    const before = this.now() - retentionMs;
    return pruneRows(this.store, 'access_tokens', 'id', 'revoked_at < ? OR expires_at < ?', before, before);
  }

  /**
   * Revokes one of the owner's tokens at once, and in the same transaction
   * every token made with it, directly or not; undefined when the owner has
   * no such token. A token revoked before took its descendants then.
   */
  async revoke(owner: string, id: string): Promise<Revoked | undefined> {
    return this.store.transaction(async (tx) => {
      await takeTurn(tx, owner);
      const now = this.now();
      const { changes } = await tx.run('UPDATE access_tokens SET revoked_at = ? WHERE id = ? AND owner = ? AND revoked_at IS NULL', now, id, owner);
      const token = await this.get(owner, id, tx);
      if (!token) return undefined;
      const descendants = changes === 0 ? [] : (await tx.all<{ id: string }>(REVOKE_DESCENDANTS, id, now)).map((row) => String(row.id));
      return { token, alreadyRevoked: changes === 0, descendants };
    });
  }

  /** Checks a presented value: its shape and checksum first, offline, then the stored hash. */
  async check(value: string): Promise<TokenCheck> {
    if (!isWellFormedAccessToken(value)) return { ok: false, reason: 'unknown' };
    const row = await this.store.get('SELECT id, owner, scopes, expires_at, revoked_at, last_used_at FROM access_tokens WHERE token_hash = ?', hash(value));
    if (!row) return { ok: false, reason: 'unknown' };
    if (row.revoked_at !== null) return { ok: false, reason: 'revoked' };
    const now = this.now();
    if (Number(row.expires_at) <= now) return { ok: false, reason: 'expired' };
    if (row.last_used_at === null || Number(row.last_used_at) < now - LAST_USED_RESOLUTION_MS) {
      await this.store.bookkeeping(() => this.store.run('UPDATE access_tokens SET last_used_at = ? WHERE id = ?', now, row.id as string));
    }
    return { ok: true, token: { id: String(row.id), owner: String(row.owner), scopes: JSON.parse(String(row.scopes)) as string[] } };
  }
}
