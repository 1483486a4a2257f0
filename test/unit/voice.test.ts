import { expect } from 'chai';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { ROOT } from '../support/cli.ts';

/**
 * Every error a user can meet speaks in one voice: a sentence that starts
 * with a capital letter (or with the name of what it is about: a field, a
 * flag, a setting, a command) and ends with a period, unless it ends with the
 * command to run next, which is left bare to be copied.
 */
const SRC = join(ROOT, 'src');

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path) : name.endsWith('.ts') ? [path] : [];
  });
}

/** Where errors are made, up to their message. */
const MADE = /(?:new (?:DomainError|GatewayError)\((?:'[a-z_]+',\s*)?|usageError\(|configError\(|notFoundError\(|invalid\(|badField\([^,]*,\s*)(?=[`'])/g;

/**
 * The string literal at an index (a quoted string, or a template literal whose
 * interpolations, nested literals and all, read as `${}`), or undefined.
 */
function literalAt(text: string, start: number): string | undefined {
  const quote = text[start];
  let out = '';
  let index = start + 1;
  /** Skips an interpolation's expression, strings and templates within it included; returns the index after its closing brace. */
  const skipExpression = (from: number): number => {
    let depth = 1;
    let at = from;
    while (at < text.length && depth > 0) {
      const c = text[at]!;
      if (c === '{') depth++;
      else if (c === '}') depth--;
      else if (c === "'" || c === '"') at = text.indexOf(c, at + 1);
      else if (c === '`') {
        at++;
        while (at < text.length && text[at] !== '`') at = text.startsWith('${', at) ? skipExpression(at + 2) : at + (text[at] === '\\' ? 2 : 1);
      }
      at++;
    }
    return at;
  };
  while (index < text.length) {
    const c = text[index]!;
    if (c === '\\') {
      out += text.slice(index, index + 2);
      index += 2;
    } else if (c === quote) {
      return out;
    } else if (quote === '`' && text.startsWith('${', index)) {
      out += '${}';
      index = skipExpression(index + 2);
    } else {
      out += c;
      index++;
    }
  }
  return undefined;
}
/** What a message may start with besides a capital: a name (field, flag, setting, command) and then a verb, or an interpolation. */
const NAMED = /^(?:\$\{|--|(?:tailscale|systemctl|journalctl|launchctl) |[a-z][A-Za-z0-9_.:/-]*(?: \$\{\})? (?:must|is|are|needs?|may|failed|chooses|of|takes)\b|[a-z]+(?:[._:/-][A-Za-z0-9_]+)+|[a-z]+[A-Z])/;
/**
 * What a message may end with besides a period: the command to run next,
 * bare, in a last clause of its own; or what it quotes (another error's
 * message, which has its own end).
 */
const BARE_END = /(?:(?:^|[:;] )(?:gateway|sudo|mv|export|printf|apt-get|journalctl) (?:(?!\. ).)*|\$\{\})$/;

describe('errors speak in one voice', () => {
  const found: { where: string; message: string }[] = [];
  for (const file of files(SRC)) {
    const text = readFileSync(file, 'utf8');
    for (const match of text.matchAll(MADE)) {
      const message = literalAt(text, match.index + match[0].length);
      // A bare kind given where a message may follow (invalid('x')...) is not a message.
      if (message === undefined || /^[a-z_]+$/.test(message)) continue;
      found.push({ where: `${relative(SRC, file)}:${text.slice(0, match.index).split('\n').length}`, message });
    }
  }

  it('finds the messages it checks', () => {
    expect(found.length).to.be.greaterThan(100);
  });

  it('each starts with a capital or with the name of what it is about', () => {
    expect(found.filter(({ message }) => !/^[A-Z"(]/.test(message) && !NAMED.test(message)).map(({ where, message }) => `${where}: ${message}`)).to.deep.equal([]);
  });

  it('each ends with a period, or with the command to run next', () => {
    expect(found.filter(({ message }) => !/[.?]$/.test(message.trimEnd()) && !BARE_END.test(message.trimEnd()))
      .map(({ where, message }) => `${where}: ${message}`)).to.deep.equal([]);
  });
});
