/**
 * exec's allowlist (tools.exec.allow): a pattern is matched against the words
 * a command will run, never against its text. A command matches only when
 * /bin/sh would run it as one program with known arguments (shell-words.ts);
 * its program must be the pattern's first word exactly; a `*` word covers one
 * or more arguments and a `*` inside a word any characters of one argument,
 * but neither covers a word that runs another command (command-launchers.ts):
 * such a word matches only where the pattern writes it out.
 */
import { launchingWords } from './command-launchers.ts';
import { shellWords } from './shell-words.ts';

/** A pattern's word: written out, `*` alone (one or more words), or a word with `*` in it (one word). */
type PatternWord = { literal: string } | { any: true } | { glob: RegExp };

export type Verdict = { allowed: true; pattern: string } | { allowed: false; why: string };

const NO_MATCH = 'the command matches no tools.exec.allow pattern';

/** A pattern's words, or why it can never match. */
export function allowPattern(pattern: string): PatternWord[] | { problem: string } {
  const parsed = shellWords(pattern, { stars: true });
  if ('refused' in parsed) return { problem: parsed.refused };
  const [program] = parsed.words;
  if (program!.stars.length > 0) return { problem: 'a pattern names its program exactly, without *' };
  return parsed.words.map((word) => {
    if (word.stars.length === 0) return { literal: word.text };
    if (word.text === '*') return { any: true };
    let source = '';
    let from = 0;
    for (const star of word.stars) {
      source += `${word.text.slice(from, star).replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}.*`;
      from = star + 1;
    }
    source += word.text.slice(from).replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    return { glob: new RegExp(`^${source}$`, 's') };
  });
}

/**
 * Whether the pattern's words cover the command's: positions are walked in
 * one pass per pattern word (the set of command words matched so far), so a
 * long command and many `*` stay linear.
 */
function covers(pattern: readonly PatternWord[], words: readonly string[], launching: ReadonlySet<number>): boolean {
  const [program] = pattern;
  if (!program || !('literal' in program) || program.literal !== words[0]) return false;
  let reached = new Uint8Array(words.length + 1);
  reached[1] = 1;
  for (const part of pattern.slice(1)) {
    const next = new Uint8Array(words.length + 1);
    let any = false;
    if ('any' in part) {
      let open = false;
      for (let w = 1; w < words.length; w++) {
        if (reached[w]) open = true;
        if (launching.has(w)) open = false;
        if (open) next[w + 1] = 1;
        any ||= open;
      }
    } else {
      for (let w = 1; w < words.length; w++) {
        if (!reached[w]) continue;
        const word = words[w]!;
        if ('literal' in part ? word === part.literal : !launching.has(w) && part.glob.test(word)) {
          next[w + 1] = 1;
          any = true;
        }
      }
    }
    if (!any) return false;
    reached = next;
  }
  return reached[words.length] === 1;
}

/** Whether a command runs without asking under these patterns, and if not, why. */
export function allowlistVerdict(command: string, patterns: readonly string[]): Verdict {
  const parsed = shellWords(command);
  if ('refused' in parsed) return { allowed: false, why: `the allowlist matches only one program with plain arguments, and ${parsed.refused}` };
  const words = parsed.words.map((word) => word.text);
  const launching = launchingWords(words);
  const counted = new Set(launching.keys());
  const compiled = patterns.map((pattern) => ({ pattern, words: allowPattern(pattern) }))
    .filter((entry): entry is { pattern: string; words: PatternWord[] } => Array.isArray(entry.words));
  const allowed = compiled.find((entry) => covers(entry.words, words, counted));
  if (allowed) return { allowed: true, pattern: allowed.pattern };
  // Say which word stopped a pattern that would have matched a command running nothing else.
  if (launching.size > 0 && compiled.some((entry) => covers(entry.words, words, new Set()))) {
    const [index, why] = [...launching].sort(([a], [b]) => a - b)[0]!;
    return { allowed: false, why: `${why} (\`${words[index]}\`): a * never covers that, only a pattern writing it out` };
  }
  return { allowed: false, why: NO_MATCH };
}
