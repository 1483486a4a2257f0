import { createHash, randomBytes } from 'node:crypto';
import { generateAccessToken, isWellFormedAccessToken, maskAccessToken } from '../../shared/api/access-token.ts';
import type { AccessTokenView } from '../../shared/protocol/results.ts';
import type { Db, Store } from '../store/database.ts';
import type { Migration } from '../store/migrations.ts';

/** Tokens a list holds unless asked for more (at most 1,000). */
export const TOKEN_LIST_LIMIT = 100;

/** A token as its owner sees it (never the value). */
export type AccessToken = AccessTokenView;

export interface VerifiedToken {
  id: string;
  owner: string;
  scopes: string[];
}

export type TokenCheck = { ok: true; token: VerifiedToken } | { ok: false; reason: 'unknown' | 'expired' | 'revoked' };

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
  masked: maskAccessToken(`x${String(row.last_four)}`),
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
}];

/** Product access tokens: only a SHA-256 hash of each is stored. */
export class TokenStore {
  private readonly store: Store;
  private readonly now: () => number;

  constructor(store: Store, now: () => number = Date.now) {
    this.store = store;
    this.now = now;
  }

  /** Creates a token; the value is returned here once and never again. */
  async create(owner: string, input: { name: string; scopes: string[]; expiresAt: number }, createdAt = this.now(), db: Db = this.store): Promise<AccessToken & { token: string }> {
    const token = generateAccessToken();
    const id = `tok_${randomBytes(9).toString('base64url')}`;
    const scopes = [...new Set(input.scopes)].sort();
    await db.run(`INSERT INTO access_tokens (id, owner, name, scopes, token_hash, last_four, created_at, expires_at)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, id, owner, input.name, JSON.stringify(scopes), hash(token), token.slice(-4), createdAt, input.expiresAt);
    return { ...(await this.get(owner, id, db))!, token };
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
    const { changes } = await this.store.run('DELETE FROM access_tokens WHERE revoked_at < ? OR expires_at < ?', before, before);
    return changes;
  }

  /** Revokes one of the owner's tokens at once (saying whether it was revoked already); undefined when the owner has no such token. */
  async revoke(owner: string, id: string): Promise<{ token: AccessToken; alreadyRevoked: boolean } | undefined> {
    const { changes } = await this.store.run('UPDATE access_tokens SET revoked_at = ? WHERE id = ? AND owner = ? AND revoked_at IS NULL', this.now(), id, owner);
    const token = await this.get(owner, id);
    return token && { token, alreadyRevoked: changes === 0 };
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
