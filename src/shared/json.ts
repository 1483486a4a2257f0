/**
 * JSON from outside, parsed within bounds. A document nested deeper than the
 * gateway takes is refused where it is parsed: within any size limit, a few
 * hundred kilobytes of brackets nest deep enough to overflow the stack of
 * whatever walks them recursively later (JSON.stringify, a schema check).
 */
export const MAX_JSON_DEPTH = 64;

/** Whether a parsed JSON value is an object (not null, not an array). */
export const isJsonObject = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === 'object' && !Array.isArray(value);

export class JsonTooDeep extends Error {
  constructor(limit: number) {
    super(`nests deeper than ${limit} levels`);
    this.name = 'JsonTooDeep';
  }
}

const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACE = 0x7d;
const CLOSE_BRACKET = 0x5d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * Whether JSON text nests objects and arrays deeper than the limit (strings are
 * skipped; the text need not be valid). A string is skipped in one jump to its
 * closing quote (one not escaped by an odd run of backslashes), so the walk
 * costs little more than the brackets, commas and numbers between strings.
 */
export function nestsDeeperThan(text: string, limit = MAX_JSON_DEPTH): boolean {
  let depth = 0;
  const length = text.length;
  for (let i = 0; i < length; i++) {
    const code = text.charCodeAt(i);
    if (code === QUOTE) {
      let end = i;
      for (;;) {
        end = text.indexOf('"', end + 1);
        // An unterminated string nests nothing more (and JSON.parse refuses it).
        if (end === -1) return false;
        let backslashes = 0;
        while (text.charCodeAt(end - 1 - backslashes) === BACKSLASH) backslashes++;
        if (backslashes % 2 === 0) break;
      }
      i = end;
    } else if (code === OPEN_BRACE || code === OPEN_BRACKET) {
      if (++depth > limit) return true;
    } else if (code === CLOSE_BRACE || code === CLOSE_BRACKET) {
      depth--;
    }
  }
  return false;
}

/** JSON.parse, refusing a document nested deeper than the limit (JsonTooDeep) as well as text that is not JSON (SyntaxError). */
export function parseJsonWithin(text: string, limit = MAX_JSON_DEPTH): unknown {
  // Nesting deeper than the limit takes more opening brackets than a text this short holds.
  if (text.length > limit && nestsDeeperThan(text, limit)) throw new JsonTooDeep(limit);
  return JSON.parse(text);
}
