import { TOKEN_SCOPES } from '../../shared/protocol/scopes.ts';
import type { GatewayConfig } from '../../shared/config/types.ts';
import type { BearerVerifier, Principal } from '../kernel/module.ts';
import { secretEquals } from '../auth/gateway-credential.ts';

/** The service key (secret api.serviceKey): internal callers, every scope. */
export function serviceKeyVerifier(serviceKey: () => string | undefined): BearerVerifier {
  return (value) => (secretEquals(value, serviceKey()) ? { kind: 'service', subject: 'service', scopes: 'all' } : undefined);
}

const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

/**
 * JWTs of the configured issuer (api.jwt.issuer, api.jwt.audience), verified
 * with jose against api.jwt.jwksUrl or the secret api.jwt.secret (HS256). The
 * subject becomes the owner ("jwt:<sub>"); the scopes are those of the
 * "scope" claim (space-separated) that product tokens know.
 */
export function jwtVerifier(config: () => GatewayConfig, secret: () => string | undefined): BearerVerifier {
  let jwks: { url: string; keys: unknown } | undefined;
  return async (value) => {
    const { issuer, audience, jwksUrl } = config().api.jwt;
    const shared = secret();
    if (!JWT_SHAPE.test(value) || !issuer || (!jwksUrl && !shared)) return undefined;
    const jose = await import('jose');
    let key: Parameters<typeof jose.jwtVerify>[1];
    if (jwksUrl) {
      if (jwks?.url !== jwksUrl) jwks = { url: jwksUrl, keys: jose.createRemoteJWKSet(new URL(jwksUrl)) };
      key = jwks.keys as Parameters<typeof jose.jwtVerify>[1];
    } else {
      key = new TextEncoder().encode(shared);
    }
    try {
      const { payload } = await jose.jwtVerify(value, key, {
        issuer, ...(audience ? { audience } : {}), ...(jwksUrl ? {} : { algorithms: ['HS256', 'HS384', 'HS512'] }),
      });
      if (typeof payload.sub !== 'string' || payload.sub.length === 0) return 'The JWT has no subject.';
      const claimed = typeof payload.scope === 'string' ? payload.scope.split(' ') : [];
      const scopes = claimed.filter((scope) => (TOKEN_SCOPES as readonly string[]).includes(scope));
      return { kind: 'jwt', subject: `jwt:${payload.sub}`, scopes: new Set(scopes) } satisfies Principal;
    } catch (error) {
      const code = (error as { code?: string }).code;
      if (code === 'ERR_JWT_EXPIRED') return 'The JWT has expired.';
      if (code === 'ERR_JWT_CLAIM_VALIDATION_FAILED') return `The JWT is not for this gateway (${(error as { claim?: string }).claim ?? 'claim'} mismatch).`;
      return 'The JWT could not be verified.';
    }
  };
}
