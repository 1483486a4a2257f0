import { expect } from 'chai';
import { markdownToSlackMrkdwn, markdownToTelegramHtml, plainText, splitMessage } from '../../../../src/server/channels/formatting.ts';

describe('replies as chat apps show them', () => {
  describe('splitMessage', () => {
    it('leaves a short text whole, and cuts a long one at paragraphs, then lines, then words', () => {
      expect(splitMessage('short', 100)).to.deep.equal(['short']);
      const paragraphs = ['a'.repeat(60), 'b'.repeat(60), 'c'.repeat(60)].join('\n\n');
      expect(splitMessage(paragraphs, 130)).to.deep.equal([`${'a'.repeat(60)}\n\n${'b'.repeat(60)}`, 'c'.repeat(60)]);
      const words = 'word '.repeat(50).trim();
      const parts = splitMessage(words, 40);
      expect(parts.every((part) => part.length <= 40 && !part.startsWith(' ') && !part.endsWith(' '))).to.equal(true);
      expect(parts.join(' ')).to.equal(words);
      // No break anywhere: a hard cut, nothing lost.
      expect(splitMessage('x'.repeat(95), 40).join('')).to.equal('x'.repeat(95));
    });

    it('closes a code block at the cut and opens it again, with its language, in the next message', () => {
      const code = Array.from({ length: 30 }, (_, index) => `line ${index}`).join('\n');
      const text = `Intro.\n\n\`\`\`ts\n${code}\n\`\`\`\n\nOutro.`;
      const parts = splitMessage(text, 120);
      expect(parts.length).to.be.above(2);
      for (const part of parts) {
        expect(part.length).to.be.at.most(120);
        expect((part.match(/```/g) ?? []).length % 2, `balanced fences in ${JSON.stringify(part)}`).to.equal(0);
      }
      expect(parts.slice(1, -1).every((part) => part.startsWith('```ts\n'))).to.equal(true);
      const lines = parts.join('\n').split('\n').filter((line) => line.startsWith('line '));
      expect(lines).to.deep.equal(code.split('\n'));
    });
  });

  describe('markdownToTelegramHtml', () => {
    it('turns Markdown into the HTML Telegram takes, escaping the rest', () => {
      expect(markdownToTelegramHtml('**bold**, *italic*, _also_, ~~gone~~ and `a < b`')).to.equal('<b>bold</b>, <i>italic</i>, <i>also</i>, <s>gone</s> and <code>a &lt; b</code>');
      expect(markdownToTelegramHtml('# Title\n- one\n- two & three')).to.equal('<b>Title</b>\n• one\n• two &amp; three');
      expect(markdownToTelegramHtml('See [the docs](https://example.com/a?b=1&c=2).')).to.equal('See <a href="https://example.com/a?b=1&amp;c=2">the docs</a>.');
      expect(markdownToTelegramHtml('```js\nif (a < b && c) {}\n```')).to.equal('<pre><code class="language-js">if (a &lt; b &amp;&amp; c) {}</code></pre>');
      expect(markdownToTelegramHtml('> quoted\n> twice\nafter')).to.equal('<blockquote>quoted\ntwice</blockquote>\nafter');
      // Not formatting: a lone star, snake_case, markup inside code, a link that is not http(s).
      expect(markdownToTelegramHtml('2 * 3 = 6 and snake_case_name')).to.equal('2 * 3 = 6 and snake_case_name');
      expect(markdownToTelegramHtml('`**not bold**`')).to.equal('<code>**not bold**</code>');
      expect(markdownToTelegramHtml('[x](javascript:alert(1)) <script>')).to.equal('[x](javascript:alert(1)) &lt;script&gt;');
    });

    it('falls back to plain text without the markup', () => {
      expect(plainText('**a** `b` [c](https://d.example)\n```\ne\n```')).to.equal('a b c (https://d.example)\n\ne\n');
    });
  });

  describe('markdownToSlackMrkdwn', () => {
    it('turns Markdown into mrkdwn, and never into a mention or a link by accident', () => {
      expect(markdownToSlackMrkdwn('**bold**, *italic*, ~~gone~~ and `x`')).to.equal('*bold*, _italic_, ~gone~ and `x`');
      expect(markdownToSlackMrkdwn('# Status\n- **ok** & <@U123> <!channel>')).to.equal('*Status*\n• *ok* &amp; &lt;@U123&gt; &lt;!channel&gt;');
      expect(markdownToSlackMrkdwn('[the docs](https://example.com/a?b=1&c=2)')).to.equal('<https://example.com/a?b=1&amp;c=2|the docs>');
      expect(markdownToSlackMrkdwn('**see [this](https://example.com)**')).to.equal('*see <https://example.com|this>*');
      expect(markdownToSlackMrkdwn('```python\nprint(1 < 2)\n```')).to.equal('```\nprint(1 &lt; 2)\n```');
      expect(markdownToSlackMrkdwn('> note')).to.equal('&gt; note');
    });
  });
});
