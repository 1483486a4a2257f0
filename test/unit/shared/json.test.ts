import { expect } from 'chai';
import { JsonTooDeep, nestsDeeperThan, parseJsonWithin } from '../../../src/shared/json.ts';

/** The walk one character at a time: what nestsDeeperThan must agree with, however it skips strings. */
function depthByCharacter(text: string): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const char = text[i];
    if (inString) {
      if (char === '\\') i++;
      else if (char === '"') inString = false;
    } else if (char === '"') inString = true;
    else if (char === '{' || char === '[') deepest = Math.max(deepest, ++depth);
    else if (char === '}' || char === ']') depth--;
  }
  return deepest;
}

describe('JSON from outside, parsed within bounds', () => {
  it('counts the nesting of objects and arrays, never brackets inside strings, whatever their escapes', () => {
    const cases = [
      '{"a":[1,{"b":[]}]}',
      '{"a":"[[[[{{{{"}',
      '{"a":"\\"[[[["}',
      '{"a":"\\\\"}',
      '{"a":"\\\\\\"[[[","b":[[]]}',
      '["\\\\\\\\",[["x"]]]',
      '{"unterminated":"[[[[',
      '"just a string with [ and {"',
      '[[[[',
      '',
    ];
    for (const text of cases) {
      const deepest = depthByCharacter(text);
      expect(nestsDeeperThan(text, deepest), text).to.equal(false);
      if (deepest > 0) expect(nestsDeeperThan(text, deepest - 1), text).to.equal(true);
    }
  });

  it('agrees with a walk one character at a time on generated text full of quotes, escapes and brackets', () => {
    const alphabet = ['"', '\\', '[', ']', '{', '}', 'a', ',', ':', ' '];
    let seed = 42;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    for (let n = 0; n < 2000; n++) {
      const text = Array.from({ length: 1 + Math.floor(random() * 60) }, () => alphabet[Math.floor(random() * alphabet.length)]).join('');
      const deepest = depthByCharacter(text);
      expect(nestsDeeperThan(text, deepest), text).to.equal(false);
      if (deepest > 0) expect(nestsDeeperThan(text, deepest - 1), text).to.equal(true);
    }
  });

  it('refuses a document nested deeper than the limit before parsing it, and text that is not JSON', () => {
    expect(() => parseJsonWithin(`${'['.repeat(65)}${']'.repeat(65)}`)).to.throw(JsonTooDeep, 'nests deeper than 64 levels');
    expect(parseJsonWithin(`${'['.repeat(64)}${']'.repeat(64)}`)).to.be.an('array');
    expect(parseJsonWithin(`{"text":"${'['.repeat(500)}"}`)).to.deep.equal({ text: '['.repeat(500) });
    expect(() => parseJsonWithin('{"a":')).to.throw(SyntaxError);
  });
});
