/**
 * A command line split into the words /bin/sh would run, for the simple
 * commands whose words sh takes as they are: one program and its arguments,
 * with single quotes, double quotes and backslashes removed as sh removes
 * them. Anything sh would expand, redirect, or read as more than one command
 * is refused with the reason, never guessed at: exec's allowlist matches only
 * commands whose words are known before they run.
 */
import { hiddenCharacter } from '../../shared/visible-text.ts';

export interface ShellWord {
  /** The word as the program receives it (quotes and backslashes removed). */
  text: string;
  /** Offsets in text of the * characters that stood unquoted (only where allowed: patterns). */
  stars: number[];
}

export type ShellWords = { words: ShellWord[] } | { refused: string };

/** Words that are sh or bash syntax where a program is expected. */
const RESERVED = new Set(['!', '{', '}', '[[', ']]', 'if', 'then', 'else', 'elif', 'fi', 'do', 'done', 'case', 'esac', 'while', 'until', 'for', 'in', 'function', 'select', 'time', 'coproc']);

/** Why an unquoted character stops a command from matching. */
const UNQUOTED: Record<string, string> = {
  ';': '`;` runs more than one command',
  '&': '`&` runs more than one command (or runs it in the background)',
  '|': '`|` runs more than one command',
  '<': '`<` is a redirection',
  '>': '`>` is a redirection',
  '(': '`(` starts a subshell',
  ')': '`)` ends a subshell',
  '$': '`$` is an expansion',
  '`': 'a backquote runs a command substitution',
  '*': 'an unquoted `*` is a glob the shell expands to file names (quote it to pass it as it is)',
  '?': 'an unquoted `?` is a glob the shell expands to file names (quote it to pass it as it is)',
  '[': 'an unquoted `[` is a glob the shell expands to file names (quote it to pass it as it is)',
  '{': 'an unquoted `{` is a brace group or a brace expansion',
  '}': 'an unquoted `}` is a brace group or a brace expansion',
};

/**
 * Splits a command line. With `stars`, an unquoted * is kept and noted (an
 * allowlist pattern's wildcard); without, it is refused like every glob.
 */
export function shellWords(line: string, options: { stars?: boolean } = {}): ShellWords {
  const hidden = hiddenCharacter(line);
  if (hidden) return { refused: `it holds ${hidden}, a control or invisible character (a line break runs a second command)` };
  const words: ShellWord[] = [];
  let text = '';
  let stars: number[] = [];
  let inWord = false;
  let i = 0;
  const end = () => {
    if (inWord) words.push({ text, stars });
    text = '';
    stars = [];
    inWord = false;
  };
  while (i < line.length) {
    const c = line[i]!;
    if (c === ' ') {
      end();
      i++;
      continue;
    }
    if (c === "'") {
      const close = line.indexOf("'", i + 1);
      if (close < 0) return { refused: 'a single quote is never closed' };
      text += line.slice(i + 1, close);
      inWord = true;
      i = close + 1;
      continue;
    }
    if (c === '"') {
      i++;
      for (;;) {
        if (i >= line.length) return { refused: 'a double quote is never closed' };
        const d = line[i]!;
        if (d === '"') break;
        if (d === '$') return { refused: '`$` in double quotes is an expansion' };
        if (d === '`') return { refused: 'a backquote in double quotes runs a command substitution' };
        // In double quotes a backslash escapes only $ ` " and \; before anything else it is itself.
        if (d === '\\' && i + 1 < line.length && '$`"\\'.includes(line[i + 1]!)) {
          text += line[i + 1];
          i += 2;
          continue;
        }
        text += d;
        i++;
      }
      inWord = true;
      i++;
      continue;
    }
    if (c === '\\') {
      if (i + 1 >= line.length) return { refused: 'it ends in a backslash' };
      text += line[i + 1];
      inWord = true;
      i += 2;
      continue;
    }
    if (c === '#' && !inWord) return { refused: '`#` starts a comment' };
    if (c === '~' && (!inWord || /[=:]$/.test(text))) return { refused: '`~` is expanded to a home folder' };
    if (c === '*' && options.stars) {
      stars.push(text.length);
      text += c;
      inWord = true;
      i++;
      continue;
    }
    const why = UNQUOTED[c];
    if (why) return { refused: why };
    text += c;
    inWord = true;
    i++;
  }
  end();
  if (words.length === 0) return { refused: 'it names no program' };
  const program = words[0]!.text;
  if (RESERVED.has(program)) return { refused: `\`${program}\` is shell syntax, not a program` };
  if (program.includes('=')) return { refused: 'it starts with a variable assignment, which changes what the program does' };
  return { words };
}
