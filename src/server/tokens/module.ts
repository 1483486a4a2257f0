/**
 * Product access tokens (POST/GET/DELETE /tokens in routes.ts and their RPC
 * methods, who may make and revoke which in issuer.ts) and the bearer
 * credentials of the HTTP API: tokens, the service key and JWTs of the
 * configured issuer.
 */
import jobsModule from '../jobs/module.ts';
import { defineModule } from '../kernel/module.ts';
import { jwtVerifier, serviceKeyVerifier } from './api-credentials.ts';
import { credentialOf, GATEWAY_OWNER, TokenIssuer } from './issuer.ts';
import { tokenRoutes } from './routes.ts';
import { TOKEN_MIGRATIONS, TokenStore } from './token-store.ts';

export { GATEWAY_OWNER };

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
    const issuer = new TokenIssuer({
      tokens, secrets: ctx.secrets, log: ctx.log, audit: (kind, fields) => store.audit(kind, fields),
      defaultExpiryDays: () => ctx.config().api.tokens.defaultExpiryDays,
    });

    // The service key and the JWT secret, read once and again when they change.
    let secrets: { serviceKey?: string; jwt?: string } = {};
    const loadSecrets = async () => {
      secrets = { serviceKey: await ctx.secrets.get('api.serviceKey'), jwt: await ctx.secrets.get('api.jwt.secret') };
    };
    await loadSecrets();
    ctx.watch.secrets(['api.serviceKey', 'api.jwt.secret'], loadSecrets);
    ctx.http.bearer((value) => issuer.verify(value));
    ctx.http.bearer(serviceKeyVerifier(() => secrets.serviceKey));
    ctx.http.bearer(jwtVerifier(ctx.config, () => secrets.jwt));

    tokenRoutes(ctx, issuer, tokens);
    ctx.rpc.method({ name: 'tokens.create', handler: (params, client) => issuer.createForOperator(params, { actor: client.deviceId, address: client.address }) });
    ctx.rpc.method({ name: 'tokens.list', handler: async ({ limit }) => tokens.list(GATEWAY_OWNER, limit) });
    ctx.rpc.method({ name: 'tokens.revoke', handler: ({ id }, client) => issuer.revokeForOperator(id, { actor: client.deviceId, address: client.address }) });
    return {
      async capsOf(credential) {
        if (!credential.startsWith('token:')) return [];
        const caps = await tokens.capsOf(credential.slice('token:'.length));
        return caps.map((cap) => ({ token: cap.id, budget: cap.budget, credentials: cap.family.map(credentialOf) }));
      },
    };
  },
});
