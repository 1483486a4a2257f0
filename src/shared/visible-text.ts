/**
 * Text shown to a person who decides on it (a command waiting for approval):
 * every character a terminal or a browser would act on, hide or draw as
 * something else is written as an escape, so what is shown is all there is.
 */

/**
 * Characters that are not what they look like: C0 and C1 controls (newline,
 * carriage return, ESC, DEL), format characters (bidirectional overrides such
 * as U+202E, zero-width spaces and joiners, the byte order mark), other
 * default-ignorable characters (variation selectors, Hangul fillers), line and
 * paragraph separators, spaces other than U+0020, the Braille blank, lone
 * surrogates, private-use and unassigned code points.
 */
export const HIDDEN_CHARACTER = /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}\p{Default_Ignorable_Code_Point}\u2800]|(?! )\p{Zs}/u;

const ESCAPED = new RegExp(`\\\\|${HIDDEN_CHARACTER.source}`, 'gu');
const NAMED: Record<string, string> = { '\\': '\\\\', '\n': '\\n', '\t': '\\t', '\r': '\\r' };

/** One character as an escape: \n, \t, \r, \\, else \xhh, \uhhhh or \u{hhhhh}. */
function escape(character: string): string {
  const named = NAMED[character];
  if (named) return named;
  const point = character.codePointAt(0)!;
  const hex = point.toString(16);
  if (point <= 0xff) return `\\x${hex.padStart(2, '0')}`;
  if (point <= 0xffff) return `\\u${hex.padStart(4, '0')}`;
  return `\\u{${hex}}`;
}

/**
 * The text whole, with every hidden character escaped and a backslash doubled
 * (so a real line break, shown as \n, never looks like the two characters a
 * command may hold). Never shortened.
 */
export function visibleText(text: string): string {
  return text.replace(ESCAPED, escape);
}

/** The first hidden character of a text, escaped, or undefined. */
export function hiddenCharacter(text: string): string | undefined {
  const found = HIDDEN_CHARACTER.exec(text);
  return found ? escape(found[0]) : undefined;
}

const HIDDEN_EVERYWHERE = new RegExp(HIDDEN_CHARACTER.source, 'gu');

/**
 * JSON whose strings hold no hidden character raw: JSON.stringify escapes
 * only C0 controls, so DEL, C1 controls (a terminal may read U+009B as CSI),
 * bidirectional and zero-width characters are written as \u escapes too.
 * It parses to the same value.
 */
export function visibleJson(value: unknown, space?: number): string {
  // Inside strings JSON.stringify has escaped every C0 control already: a raw line break is indentation.
  return JSON.stringify(value, null, space).replace(HIDDEN_EVERYWHERE, (character) => (character === '\n' ? character
    : [...Array(character.length).keys()].map((unit) => `\\u${character.charCodeAt(unit).toString(16).padStart(4, '0')}`).join('')));
}
