import type { ErrorObject } from 'ajv';
import { TOKEN_SCOPES } from '../../shared/protocol/scopes.ts';
import { DomainError } from '../kernel/errors.ts';
import { apiSchemaProblems, loadSchemaCompiler } from '../kernel/schema.ts';

export interface TokenRequest {
  name: string;
  scopes: string[];
  expiresAt: number;
  /** Whether the caller named expiresAt (else it is the default). */
  expiryAsked: boolean;
  /** A cap on its spending, in models.currency. */
  budget?: { daily?: number; monthly?: number };
}

const DAY_MS = 86_400_000;
const invalid = (message: string) => new DomainError('invalid', message);

/**
 * Checks a token request: a non-empty name, known scopes, and an expiry in the
 * future; without one, the default (api.tokens.defaultExpiryDays, 90 days).
 * `grantable` bounds the scopes: a token never creates a token stronger than itself.
 */
export async function parseTokenRequest(body: unknown, options: { defaultExpiryDays: number; now: number; grantable: (scope: string) => boolean }): Promise<TokenRequest> {
  // The structure is checked by the schema the OpenAPI document publishes; what it cannot say is checked after.
  await loadSchemaCompiler();
  const problems = apiSchemaProblems('TokenCreateRequest', body, describe);
  if (problems.length > 0) throw invalid(problems.join(' '));
  const { name, scopes, expiresAt, budget } = body as { name: string; scopes: string[]; expiresAt?: string; budget?: { daily?: number; monthly?: number } };
  const beyond = scopes.filter((scope) => !options.grantable(scope));
  if (beyond.length > 0) throw invalid(`A token cannot grant scopes its creator does not hold: ${beyond.join(', ')}.`);
  let expires = options.now + options.defaultExpiryDays * DAY_MS;
  if (expiresAt !== undefined) {
    expires = Date.parse(expiresAt);
    if (expires <= options.now) throw invalid('expiresAt is in the past.');
  }
  const capped = budget && (budget.daily !== undefined || budget.monthly !== undefined) ? budget : undefined;
  return { name: name.trim(), scopes, expiresAt: expires, expiryAsked: expiresAt !== undefined, ...(capped ? { budget: capped } : {}) };
}

/**
 * A token made with a token (its parent) lives no longer than the parent.
 * Without expiresAt it ends with the parent when the default would outlast
 * it; an expiresAt after the parent's is refused rather than quietly moved
 * earlier, because a caller who named a time plans around it.
 */
export function withinParent(request: TokenRequest, parent: { id: string; expiresAt: number }): TokenRequest {
  if (request.expiresAt <= parent.expiresAt) return request;
  const ends = new Date(parent.expiresAt).toISOString();
  if (request.expiryAsked) {
    const fix = `ask for ${ends} or earlier, or leave expiresAt out to end with it`;
    throw invalid(`expiresAt is after ${ends}, when token ${parent.id} that makes this one expires, and a token never outlives the token that made it: ${fix}.`);
  }
  return { ...request, expiresAt: parent.expiresAt };
}

/** Schema errors in words a caller can act on. */
function describe(error: ErrorObject): string | undefined {
  const field = error.instancePath.split('/')[1];
  if (error.instancePath === '' && error.keyword === 'type') return 'The body must be a JSON object {name, scopes, expiresAt?, budget?}.';
  if (error.keyword === 'required') return `${String(error.params.missingProperty)} is required.`;
  if (error.keyword === 'additionalProperties') return `Unknown fields: ${String(error.params.additionalProperty)}.`;
  if (field === 'name') return error.keyword === 'maxLength' ? 'name must be at most 100 characters.' : 'name must be a non-empty string.';
  if (field === 'scopes' && error.keyword === 'enum') return `Unknown scopes: ${JSON.stringify(error.data)}; known: ${TOKEN_SCOPES.join(', ')}.`;
  if (field === 'scopes' && error.keyword === 'uniqueItems') return 'scopes must not repeat.';
  if (field === 'scopes') return `scopes must be a non-empty array of: ${TOKEN_SCOPES.join(', ')}.`;
  if (field === 'expiresAt') return 'expiresAt must be an ISO 8601 time, such as 2027-01-31T00:00:00Z.';
  if (field === 'budget') return 'budget must be an object {daily?, monthly?} of amounts of 0 or more, in models.currency.';
  return undefined;
}
