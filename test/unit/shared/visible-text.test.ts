import { expect } from 'chai';
import fc from 'fast-check';
import { HIDDEN_CHARACTER, visibleJson, visibleText } from '../../../src/shared/visible-text.ts';

/** The escapes read back: proof that two different texts are never shown alike. */
function unescape(shown: string): string {
  return shown.replace(/\\(n|t|r|\\|x([0-9a-f]{2})|u\{([0-9a-f]+)\}|u([0-9a-f]{4}))/g, (_all, kind: string, x?: string, braced?: string, u?: string) => {
    if (kind === 'n') return '\n';
    if (kind === 't') return '\t';
    if (kind === 'r') return '\r';
    if (kind === '\\') return '\\';
    return String.fromCodePoint(parseInt((x ?? braced ?? u)!, 16));
  });
}

describe('text shown to an approver', () => {
  it('escapes line breaks, tabs, ESC, C1, bidirectional and zero-width characters, and doubles backslashes, never cutting', () => {
    expect(visibleText('git status\nid')).to.equal('git status\\nid');
    expect(visibleText('a\tb\rc')).to.equal('a\\tb\\rc');
    expect(visibleText('ls \x1b[2K\x1b[1Aclear')).to.equal('ls \\x1b[2K\\x1b[1Aclear');
    expect(visibleText('x\u0085y\u009bz\u007f\u0000')).to.equal('x\\x85y\\x9bz\\x7f\\x00');
    expect(visibleText('ls \u202eexe.txt')).to.equal('ls \\u202eexe.txt');
    expect(visibleText('a\u200bb\u200dc\ufeffd\u2066e\u2069')).to.equal('a\\u200bb\\u200dc\\ufeffd\\u2066e\\u2069');
    expect(visibleText('a\u00a0b\u3000c\u2028d\u3164e\u2800f')).to.equal('a\\xa0b\\u3000c\\u2028d\\u3164e\\u2800f');
    expect(visibleText('tag\u{e0041}\u{f0000}')).to.equal('tag\\u{e0041}\\u{f0000}');
    expect(visibleText('lone \ud800 half')).to.equal('lone \\ud800 half');
    expect(visibleText('grep -n "a\\.b" x')).to.equal('grep -n "a\\\\.b" x');
    expect(visibleText('naïve 😀 日本語 — “quoted”')).to.equal('naïve 😀 日本語 — “quoted”');
    const long = `echo ${'x'.repeat(5000)}\n${'y'.repeat(5000)}`;
    expect(visibleText(long)).to.have.length(long.length + 1);
  });

  it('shows every text in a way no other text is shown, with nothing hidden left (property)', () => {
    fc.assert(fc.property(fc.string({ unit: fc.oneof(fc.constantFrom('\\', 'n', 'x', 'u', '{', '1', '\n', '\u202e', '\u200b', '\x1b', '\ud800'), fc.string({ unit: 'binary', maxLength: 1 })) }), (text) => {
      const shown = visibleText(text);
      expect(HIDDEN_CHARACTER.test(shown), JSON.stringify(shown)).to.equal(false);
      expect(unescape(shown)).to.equal(text);
    }), { numRuns: 500 });
  });

  it('writes JSON whose strings show their hidden characters as \\u escapes, parsing to the same value', () => {
    const value = { command: 'ls \u202eexe\n\x1b[2K\u009b1m\u200b\u{e0041}', nested: [{ a: '\u007f' }] };
    const shown = visibleJson(value, 2);
    expect(shown).to.include('ls \\u202eexe\\n\\u001b[2K\\u009b1m\\u200b\\udb40\\udc41').and.include('\\u007f');
    expect(HIDDEN_CHARACTER.test(shown.replaceAll('\n', ''))).to.equal(false);
    expect(JSON.parse(shown)).to.deep.equal(value);
    expect(shown.split('\n')).to.have.length(JSON.stringify(value, null, 2).split('\n').length);
  });
});
