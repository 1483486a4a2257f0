/**
 * Who may make and revoke which product access token: a caller over HTTP
 * grants only scopes it holds, a token made with a token records it, ends no
 * later than it and dies with it (DESIGN.md, "a credential never grows"); a
 * caller revokes only tokens holding no scope it lacks. The operator's
 * tokens (made over the WebSocket, from the host's CLI) belong to the same
 * owner as the gateway credential on HTTP. Every change is audited.
 */
import type { Logger } from 'pino';
import type { TokenCreated, TokenRevoked } from '../../shared/protocol/results.ts';
import type { SecretStore } from '../../shared/secrets/secret-store.ts';
import { holds } from '../auth/http-auth.ts';
import { DomainError } from '../kernel/errors.ts';
import type { Principal } from '../kernel/module.ts';
import type { AuditFields } from '../store/database.ts';
import { parseTokenRequest } from './token-request.ts';
import type { CreatedToken, Revoked, TokenStore } from './token-store.ts';

/** Tokens made from the host's CLI belong to the same owner as the gateway credential on HTTP. */
export const GATEWAY_OWNER = 'gateway';

const REFUSED = { expired: 'The token has expired.', revoked: 'The token was revoked.' } as const;

/** How a product token's principal names it (credentialId), and the token's id back from a principal. */
export const credentialOf = (id: string) => `token:${id}`;
export const tokenIdOf = (principal: Principal): string | undefined =>
  principal.kind === 'token' && principal.credentialId?.startsWith('token:') ? principal.credentialId.slice('token:'.length) : undefined;

const created = (token: CreatedToken): TokenCreated => ({
  id: token.id, name: token.name, scopes: token.scopes, createdAt: token.createdAt, expiresAt: token.expiresAt, ...(token.budget ? { budget: token.budget } : {}), token: token.token,
});

const revokedView = ({ token, alreadyRevoked, descendants }: Revoked): TokenRevoked => ({
  id: token.id, revokedAt: token.revokedAt, alreadyRevoked, descendantsRevoked: descendants.length,
});

export interface TokenIssuerDeps {
  tokens: TokenStore;
  audit: (kind: string, fields: AuditFields) => Promise<void>;
  /** Where `tokens create --save` keeps a copy of an operator's token. */
  secrets: Pick<SecretStore, 'delete'>;
  log: Logger;
  defaultExpiryDays: () => number;
  now?: () => number;
}

/** Who acts, for the audit. */
interface Actor {
  actor: string | undefined;
  address: string | undefined;
}

export class TokenIssuer {
  private readonly deps: TokenIssuerDeps;
  private readonly now: () => number;

  constructor(deps: TokenIssuerDeps) {
    this.deps = deps;
    this.now = deps.now ?? Date.now;
  }

  /** The bearer credential of a product token: its principal, undefined for a value that is no token, or why a token is refused. */
  async verify(value: string): Promise<Principal | string | undefined> {
    const check = await this.deps.tokens.check(value);
    if (check.ok) return { kind: 'token', subject: check.token.owner, scopes: new Set(check.token.scopes), credentialId: credentialOf(check.token.id) };
    return check.reason === 'unknown' ? undefined : REFUSED[check.reason];
  }

  /** A token a caller over HTTP makes (POST /tokens): scopes it holds, within its own token's life when it calls with one. */
  async create(principal: Principal, body: unknown, address: string | undefined): Promise<TokenCreated> {
    const now = this.now();
    const request = await parseTokenRequest(body, { defaultExpiryDays: this.deps.defaultExpiryDays(), now, grantable: (scope) => holds(principal, scope) });
    // A token made with a token records it, ends no later than it, and dies with it (DESIGN.md, "a credential never grows").
    const parent = tokenIdOf(principal);
    let token: CreatedToken;
    if (parent === undefined) {
      token = await this.deps.tokens.create(principal.subject, request, now);
    } else {
      const made = await this.deps.tokens.createChild(principal.subject, parent, request, now);
      // The parent stopped working after it was checked for this request: answered as if it had been then.
      if (!made.ok) {
        throw new DomainError('unauthorized', made.reason === 'unknown' ? 'The credential is not valid.' : REFUSED[made.reason], {
          headers: { 'www-authenticate': 'Bearer error="invalid_token"' },
        });
      }
      token = made.token;
    }
    await this.deps.audit('token.created', {
      actor: principal.subject, subject: token.id, address,
      detail: { name: token.name, scopes: token.scopes, ...(parent === undefined ? {} : { parent }) },
    });
    return created(token);
  }

  /** An operator's token (tokens.create over the WebSocket): any scope. */
  async createForOperator(params: unknown, { actor, address }: Actor): Promise<TokenCreated> {
    const now = this.now();
    const request = await parseTokenRequest(params, { defaultExpiryDays: this.deps.defaultExpiryDays(), now, grantable: () => true });
    const token = await this.deps.tokens.create(GATEWAY_OWNER, request, now);
    await this.deps.audit('token.created', { actor, subject: token.id, address, detail: { name: token.name, scopes: token.scopes } });
    return created(token);
  }

  /** Revokes one of an HTTP caller's tokens (DELETE /tokens/:id), with every token made with it. */
  async revoke(principal: Principal, id: string, address: string | undefined): Promise<TokenRevoked> {
    const target = await this.deps.tokens.get(principal.subject, id);
    if (!target) throw new DomainError('not_found', `No token ${id} of yours.`);
    // Revoking is power over a credential too: a caller revokes only tokens holding no scope it lacks (their descendants hold no more).
    const lacking = target.scopes.filter((scope) => !holds(principal, scope));
    if (lacking.length > 0) {
      throw new DomainError('forbidden', `Token ${id} holds scopes this credential lacks: ${lacking.join(', ')}. `
        + 'Revoke it with a credential that holds them, such as the gateway credential or `gateway tokens revoke` on the host.');
    }
    const revoked = await this.deps.tokens.revoke(principal.subject, id);
    if (!revoked) throw new DomainError('not_found', `No token ${id} of yours.`);
    return this.revoked(revoked, { actor: principal.subject, address });
  }

  /** Revokes one of the operator's tokens (tokens.revoke over the WebSocket). */
  async revokeForOperator(id: string, who: Actor): Promise<TokenRevoked> {
    const revoked = await this.deps.tokens.revoke(GATEWAY_OWNER, id);
    if (!revoked) throw new DomainError('not_found', `No token ${id}.`);
    return this.revoked(revoked, who);
  }

  /**
   * Records a revocation, and each token revoked with it under its own id
   * (so a search by token finds why it stopped working), and forgets the
   * token's saved copy. Its descendants' copies need no removing: only the
   * operator's tokens are saved, and those have no parent.
   */
  private async revoked(revoked: Revoked, { actor, address }: Actor): Promise<TokenRevoked> {
    const { id } = revoked.token;
    if (!revoked.alreadyRevoked) {
      await this.deps.audit('token.revoked', { actor, subject: id, address, ...(revoked.descendants.length > 0 ? { detail: { descendants: revoked.descendants.length } } : {}) });
      for (const descendant of revoked.descendants) await this.deps.audit('token.revoked', { actor, subject: descendant, address, detail: { revokedWith: id } });
    }
    // A revoked token is of no use to keep: the copy `tokens create --save` put in the profile's store goes with it.
    await this.deps.secrets.delete(`tokens.saved.${id.replace(/[^A-Za-z0-9_-]/g, '_')}`).catch((error: unknown) => {
      this.deps.log.warn({ token: id, error: (error as Error).message }, 'the saved copy of a revoked token could not be removed');
    });
    return revokedView(revoked);
  }
}
