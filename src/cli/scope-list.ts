import { usageError } from '../shared/errors.ts';

/**
 * The scopes of a --scope flag, repeated or given as a comma-separated list
 * (both spellings, --scope and --scopes, take both forms): each one known,
 * none twice. An unknown one is a usage error naming the known ones.
 */
export function scopeList<S extends string>(given: readonly string[], known: readonly S[]): S[] {
  const scopes = [...new Set(given.flatMap((value) => value.split(',')).map((scope) => scope.trim()).filter(Boolean))];
  const unknown = scopes.filter((scope) => !(known as readonly string[]).includes(scope));
  if (unknown.length > 0) throw usageError(`--scope: unknown scope${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')}; known: ${known.join(', ')}.`);
  if (scopes.length === 0) throw usageError(`--scope: name at least one scope (${known.join(', ')}).`);
  return scopes as S[];
}
