import type { BearerVerifier } from '../auth/http-auth.ts';
import type { MethodTable } from '../ws/method-table.ts';
import { idParam, invalidParams, RpcError } from '../ws/rpc-error.ts';
import type { TokenStore } from './token-store.ts';

/** Tokens made from the host's CLI belong to the same owner as the gateway credential on HTTP. */
export const GATEWAY_OWNER = 'gateway';

/** Product access tokens as bearer credentials on the HTTP API. */
export function tokenVerifier(tokens: TokenStore): BearerVerifier {
  return (value) => {
    const check = tokens.check(value);
    if (check.ok) return { kind: 'token', subject: check.token.owner, scopes: new Set(check.token.scopes) };
    if (check.reason === 'expired') return 'The token has expired.';
    if (check.reason === 'revoked') return 'The token was revoked.';
    return undefined;
  };
}

export interface TokenMethodDeps {
  tokens: TokenStore;
  defaultExpiryDays: () => number;
  audit: (kind: string, fields: { actor?: string; subject?: string; address?: string; detail?: Record<string, unknown> }) => void;
}

/** tokens.create / tokens.list / tokens.revoke for the CLI. */
export function registerTokenMethods(methods: MethodTable, deps: TokenMethodDeps): void {
  methods
    .add('tokens.create', async (params, client) => {
      // Loaded on first use: the request schema's validator is not needed to start the daemon.
      const { parseTokenRequest, TokenRequestError } = await import('./token-request.ts');
      const now = Date.now();
      let request;
      try {
        request = parseTokenRequest(params, { defaultExpiryDays: deps.defaultExpiryDays(), now, grantable: () => true });
      } catch (error) {
        if (error instanceof TokenRequestError) throw invalidParams(error.message);
        throw error;
      }
      const created = deps.tokens.create(GATEWAY_OWNER, request, now);
      deps.audit('token.created', { actor: client.deviceId, subject: created.id, address: client.address, detail: { name: created.name, scopes: created.scopes } });
      return { id: created.id, name: created.name, scopes: created.scopes, createdAt: created.createdAt, expiresAt: created.expiresAt, token: created.token };
    })
    .add('tokens.list', () => ({ tokens: deps.tokens.list(GATEWAY_OWNER) }))
    .add('tokens.revoke', (params, client) => {
      const id = idParam(params, 'id');
      const revoked = deps.tokens.revoke(GATEWAY_OWNER, id);
      if (!revoked) throw new RpcError('NOT_FOUND', `no token ${id}`);
      deps.audit('token.revoked', { actor: client.deviceId, subject: id, address: client.address });
      return { id: revoked.id, revokedAt: revoked.revokedAt };
    });
}
