/**
 * JSON from outside, parsed within bounds. A document nested deeper than the
 * gateway takes is refused where it is parsed: within any size limit, a few
 * hundred kilobytes of brackets nest deep enough to overflow the stack of
 * whatever walks them recursively later (JSON.stringify, a schema check).
 */
export const MAX_JSON_DEPTH = 64;

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

/** Whether JSON text nests objects and arrays deeper than the limit (strings are skipped; the text need not be valid). */
export function nestsDeeperThan(text: string, limit = MAX_JSON_DEPTH): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (inString) {
      if (code === BACKSLASH) i++;
      else if (code === QUOTE) inString = false;
    } else if (code === QUOTE) {
      inString = true;
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
  if (nestsDeeperThan(text, limit)) throw new JsonTooDeep(limit);
  return JSON.parse(text);
}
