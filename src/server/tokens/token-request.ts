import { TOKEN_SCOPES } from '../../shared/protocol/scopes.ts';

export class TokenRequestError extends Error {}

export interface TokenRequest {
  name: string;
  scopes: string[];
  expiresAt: number;
}

const DAY_MS = 86_400_000;
const MAX_NAME = 100;

/**
 * Checks a token request: a non-empty name, known scopes, and an expiry in the
 * future; without one, the default (api.tokens.defaultExpiryDays, 90 days).
 * `grantable` bounds the scopes: a token never creates a token stronger than itself.
 */
export function parseTokenRequest(body: unknown, options: { defaultExpiryDays: number; now: number; grantable: (scope: string) => boolean }): TokenRequest {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new TokenRequestError('The body must be a JSON object {name, scopes, expiresAt?}.');
  const { name, scopes, expiresAt, ...rest } = body as Record<string, unknown>;
  const unknownFields = Object.keys(rest);
  if (unknownFields.length > 0) throw new TokenRequestError(`Unknown fields: ${unknownFields.join(', ')}.`);
  if (typeof name !== 'string' || name.trim().length === 0) throw new TokenRequestError('name must be a non-empty string.');
  if (name.length > MAX_NAME) throw new TokenRequestError(`name must be at most ${MAX_NAME} characters.`);
  if (!Array.isArray(scopes) || scopes.length === 0) throw new TokenRequestError(`scopes must be a non-empty array of: ${TOKEN_SCOPES.join(', ')}.`);
  const unknown = scopes.filter((scope) => typeof scope !== 'string' || !(TOKEN_SCOPES as readonly string[]).includes(scope));
  if (unknown.length > 0) throw new TokenRequestError(`Unknown scopes: ${unknown.map((s) => JSON.stringify(s)).join(', ')}; known: ${TOKEN_SCOPES.join(', ')}.`);
  const beyond = (scopes as string[]).filter((scope) => !options.grantable(scope));
  if (beyond.length > 0) throw new TokenRequestError(`A token cannot grant scopes its creator does not hold: ${beyond.join(', ')}.`);
  let expires = options.now + options.defaultExpiryDays * DAY_MS;
  if (expiresAt !== undefined) {
    if (typeof expiresAt !== 'string' || Number.isNaN(Date.parse(expiresAt))) throw new TokenRequestError('expiresAt must be an ISO 8601 time, such as 2027-01-31T00:00:00Z.');
    expires = Date.parse(expiresAt);
    if (expires <= options.now) throw new TokenRequestError('expiresAt is in the past.');
  }
  return { name: name.trim(), scopes: scopes as string[], expiresAt: expires };
}
