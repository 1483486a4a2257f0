import { usageError } from '../shared/errors.ts';

const UNITS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** Parses durations such as 90s, 10m, 2h, 30d into milliseconds. */
export function parseDuration(text: string, flag: string): number {
  const match = /^(\d+)([smhd])$/.exec(text.trim());
  if (!match) throw usageError(`${flag} must be a duration such as 90s, 10m, 2h or 30d (got ${JSON.stringify(text)}).`);
  return Number(match[1]) * UNITS[match[2]!]!;
}

/** A time given as an ISO date or a duration ago (for --since). */
export function parseSince(text: string): number {
  if (/^\d+[smhd]$/.test(text.trim())) return Date.now() - parseDuration(text, '--since');
  const at = Date.parse(text);
  if (Number.isNaN(at)) throw usageError(`--since must be an ISO time or a duration such as 1h (got ${JSON.stringify(text)}).`);
  return at;
}
