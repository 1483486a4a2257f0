/**
 * Product access tokens (POST/GET/DELETE /tokens and their RPC methods) and
 * the bearer credentials of the HTTP API: tokens, the service key and JWTs
 * of the configured issuer.
 */
import { holds } from '../auth/http-auth.ts';
import jobsModule from '../jobs/module.ts';
import { DomainError } from '../kernel/errors.ts';
import { errorResponse, jsonResponse, protectedErrors, ref, security } from '../kernel/api-doc.ts';
import { defineModule, type BearerVerifier, type Principal } from '../kernel/module.ts';
import { ROUTE_SCOPES } from '../../shared/api/routes.ts';
import type { TokenCreated, TokenRevoked } from '../../shared/protocol/results.ts';
import { jwtVerifier, serviceKeyVerifier } from './api-credentials.ts';
import { parseTokenRequest } from './token-request.ts';
import { TOKEN_LIST_LIMIT, TOKEN_MIGRATIONS, TokenStore, type CreatedToken, type Revoked } from './token-store.ts';

/** GET /tokens?limit=N: an integer from 1 to 1,000 (default 100); nothing else is taken. */
function listLimit(query: Record<string, string | string[] | undefined>): number {
  const unknown = Object.keys(query).filter((key) => key !== 'limit');
  if (unknown.length > 0) throw new DomainError('invalid', `Unknown query parameters: ${unknown.join(', ')}.`);
  const given = query.limit;
  if (given === undefined) return TOKEN_LIST_LIMIT;
  if (typeof given !== 'string' || !/^\d{1,4}$/.test(given) || Number(given) < 1 || Number(given) > 1000) throw new DomainError('invalid', 'limit must be an integer from 1 to 1000.');
  return Number(given);
}

/** Tokens made from the host's CLI belong to the same owner as the gateway credential on HTTP. */
export const GATEWAY_OWNER = 'gateway';

const created = (token: CreatedToken): TokenCreated => ({
  id: token.id, name: token.name, scopes: token.scopes, createdAt: token.createdAt, expiresAt: token.expiresAt, ...(token.budget ? { budget: token.budget } : {}), token: token.token,
});

/** How a product token's principal names it (credentialId), and the token's id back from a principal. */
const credentialOf = (id: string) => `token:${id}`;
const tokenIdOf = (principal: Principal): string | undefined =>
  principal.kind === 'token' && principal.credentialId?.startsWith('token:') ? principal.credentialId.slice('token:'.length) : undefined;

const REFUSED = { expired: 'The token has expired.', revoked: 'The token was revoked.' } as const;

/** What other modules get: the caps on a credential's spending (a product token's own budget and its makers'). */
export interface Tokens {
  /** For a credential (token:<id>), each cap: the token that holds it, its budget, and the credentials whose spending counts toward it. */
  capsOf(credential: string): Promise<{ token: string; budget: { daily?: number; monthly?: number }; credentials: string[] }[]>;
}

export default defineModule<Tokens>({
  id: 'tokens',
  needs: [jobsModule],
  migrations: TOKEN_MIGRATIONS,
  async setup(ctx) {
    const { store } = ctx;
    const tokens = new TokenStore(store);
    // A token revoked or expired longer ago than the store's retention admits no one and is not kept.
    ctx.use(jobsModule).retention('accessTokens', (retentionMs) => tokens.prune(retentionMs));
    const audit = (kind: string, fields: Parameters<typeof store.audit>[1]) => store.audit(kind, fields);
    const defaultExpiryDays = () => ctx.config().api.tokens.defaultExpiryDays;

    // The service key and the JWT secret, read once and again when they change.
    let secrets: { serviceKey?: string; jwt?: string } = {};
    const loadSecrets = async () => {
      secrets = { serviceKey: await ctx.secrets.get('api.serviceKey'), jwt: await ctx.secrets.get('api.jwt.secret') };
    };
    await loadSecrets();
    ctx.watch.secrets(['api.serviceKey', 'api.jwt.secret'], loadSecrets);

    const tokenVerifier: BearerVerifier = async (value) => {
      const check = await tokens.check(value);
      if (check.ok) return { kind: 'token', subject: check.token.owner, scopes: new Set(check.token.scopes), credentialId: credentialOf(check.token.id) };
      return check.reason === 'unknown' ? undefined : REFUSED[check.reason];
    };
    ctx.http.bearer(tokenVerifier);
    ctx.http.bearer(serviceKeyVerifier(() => secrets.serviceKey));
    ctx.http.bearer(jwtVerifier(ctx.config, () => secrets.jwt));

    ctx.http.reserve('/tokens');
    ctx.http.document({
      paths: {
        '/tokens': {
          post: {
            summary: 'create a product access token', ...security('POST /tokens'),
            requestBody: { required: true, content: { 'application/json': { schema: ref('TokenCreateRequest') } } },
            responses: { 201: jsonResponse('TokenCreated', 'created; the token is shown once'), ...protectedErrors, 413: errorResponse('body too large'), 415: errorResponse('not JSON') },
          },
          get: {
            summary: "list the caller's tokens, masked: those in force first, then revoked and expired ones until retention", ...security('GET /tokens'),
            parameters: [{ name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 1000, default: TOKEN_LIST_LIMIT } }],
            responses: { 200: jsonResponse('TokenList', 'tokens'), ...protectedErrors },
          },
        },
        '/tokens/{id}': {
          delete: {
            summary: 'revoke a token', ...security('DELETE /tokens/:id'),
            parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }],
            responses: {
              200: jsonResponse('TokenRevoked', 'revoked, with every token made with it'), ...protectedErrors,
              403: errorResponse("the credential lacks the route's scope, or a scope the token to revoke holds"), 404: errorResponse("not one of the caller's tokens"),
            },
          },
        },
      },
    });
    // A revoked token is of no use to keep: the copy `tokens create --save` put in the profile's store goes with it.
    const forgetSaved = async (id: string) => {
      await ctx.secrets.delete(`tokens.saved.${id.replace(/[^A-Za-z0-9_-]/g, '_')}`).catch((error: unknown) => {
        ctx.log.warn({ token: id, error: (error as Error).message }, 'the saved copy of a revoked token could not be removed');
      });
    };
    const revokedView = ({ token, alreadyRevoked, descendants }: Revoked): TokenRevoked => ({
      id: token.id, revokedAt: token.revokedAt, alreadyRevoked, descendantsRevoked: descendants.length,
    });
    /**
     * Records a revocation, and each token revoked with it under its own id
     * (so a search by token finds why it stopped working). Their saved copies
     * need no removing: only the operator's tokens are saved, and those have
     * no parent.
     */
    const revocation = async (revoked: Revoked, actor: string | undefined, address: string | undefined) => {
      if (revoked.alreadyRevoked) return;
      const { id } = revoked.token;
      await audit('token.revoked', { actor, subject: id, address, ...(revoked.descendants.length > 0 ? { detail: { descendants: revoked.descendants.length } } : {}) });
      for (const descendant of revoked.descendants) await audit('token.revoked', { actor, subject: descendant, address, detail: { revokedWith: id } });
    };

    ctx.http.route({
      method: 'POST', path: '/tokens', auth: { scope: ROUTE_SCOPES['POST /tokens'] },
      body: { types: ['application/json'], limit: () => ctx.config().gateway.http.maxBodyBytes },
      handler: async (http) => {
        const principal = http.state.principal as Principal;
        const body = http.received!.value;
        const now = Date.now();
        const request = await parseTokenRequest(body, { defaultExpiryDays: defaultExpiryDays(), now, grantable: (scope) => holds(principal, scope) });
        // A token made with a token records it, ends no later than it, and dies with it (DESIGN.md, "a credential never grows").
        const parent = tokenIdOf(principal);
        let token: CreatedToken;
        if (parent === undefined) {
          token = await tokens.create(principal.subject, request, now);
        } else {
          const made = await tokens.createChild(principal.subject, parent, request, now);
          // The parent stopped working after it was checked for this request: answered as if it had been then.
          if (!made.ok) {
            throw new DomainError('unauthorized', made.reason === 'unknown' ? 'The credential is not valid.' : REFUSED[made.reason], {
              headers: { 'www-authenticate': 'Bearer error="invalid_token"' },
            });
          }
          token = made.token;
        }
        await audit('token.created', {
          actor: principal.subject, subject: token.id, address: http.req.socket.remoteAddress,
          detail: { name: token.name, scopes: token.scopes, ...(parent === undefined ? {} : { parent }) },
        });
        http.status = 201;
        http.body = created(token);
      },
    });
    ctx.http.route({
      method: 'GET', path: '/tokens', auth: { scope: ROUTE_SCOPES['GET /tokens'] },
      handler: async (http) => { http.body = await tokens.list((http.state.principal as Principal).subject, listLimit(http.query)); },
    });
    ctx.http.route({
      method: 'DELETE', path: '/tokens/:id', auth: { scope: ROUTE_SCOPES['DELETE /tokens/:id'] },
      handler: async (http) => {
        const principal = http.state.principal as Principal;
        const id = http.params.id;
        const target = await tokens.get(principal.subject, id);
        if (!target) throw new DomainError('not_found', `No token ${id} of yours.`);
        // Revoking is power over a credential too: a caller revokes only tokens holding no scope it lacks (their descendants hold no more).
        const lacking = target.scopes.filter((scope) => !holds(principal, scope));
        if (lacking.length > 0) {
          throw new DomainError('forbidden', `Token ${id} holds scopes this credential lacks: ${lacking.join(', ')}. `
            + 'Revoke it with a credential that holds them, such as the gateway credential or `gateway tokens revoke` on the host.');
        }
        const revoked = await tokens.revoke(principal.subject, id);
        if (!revoked) throw new DomainError('not_found', `No token ${id} of yours.`);
        await revocation(revoked, principal.subject, http.req.socket.remoteAddress);
        await forgetSaved(id);
        http.body = revokedView(revoked);
      },
    });

    ctx.rpc.method({
      name: 'tokens.create',
      handler: async (params, client) => {
        const now = Date.now();
        const request = await parseTokenRequest(params, { defaultExpiryDays: defaultExpiryDays(), now, grantable: () => true });
        const token = await tokens.create(GATEWAY_OWNER, request, now);
        await audit('token.created', { actor: client.deviceId, subject: token.id, address: client.address, detail: { name: token.name, scopes: token.scopes } });
        return created(token);
      },
    });
    ctx.rpc.method({ name: 'tokens.list', handler: async ({ limit }) => tokens.list(GATEWAY_OWNER, limit) });
    ctx.rpc.method({
      name: 'tokens.revoke',
      handler: async ({ id }, client) => {
        const revoked = await tokens.revoke(GATEWAY_OWNER, id);
        if (!revoked) throw new DomainError('not_found', `No token ${id}.`);
        await revocation(revoked, client.deviceId, client.address);
        await forgetSaved(id);
        return revokedView(revoked);
      },
    });
    return {
      async capsOf(credential) {
        if (!credential.startsWith('token:')) return [];
        const caps = await tokens.capsOf(credential.slice('token:'.length));
        return caps.map((cap) => ({ token: cap.id, budget: cap.budget, credentials: cap.family.map(credentialOf) }));
      },
    };
  },
});
