/**
 * Replies as Signal shows them: Signal has no markup, but styles ranges of a
 * message's text (bold, italic, strikethrough, monospace, spoiler), each
 * sent as "start:length:STYLE" in UTF-16 code units, as its apps count. An
 * agent's Markdown becomes the text without its markers and those ranges:
 * code (spans and fenced blocks) monospace, bold, italic, strikethrough,
 * headings bold, links as "label (address)", list bullets as "•".
 */
import { FENCE, fencedBlock } from '../formatting.ts';

export type SignalStyle = 'BOLD' | 'ITALIC' | 'STRIKETHROUGH' | 'MONOSPACE' | 'SPOILER';

/** A message's text and its styles, as signal-cli's send takes them (textStyle). */
export interface StyledText { text: string; styles: string[] }

/** Inline markup, the first that matches at a place winning: code, a link, bold, strikethrough, italic. */
const INLINE = /`([^`]+)`|\[([^\]]+)\]\((https?:\/\/[^\s)]+)\)|\*\*(?=\S)(.+?)(?<=\S)\*\*|__(?=\S)(.+?)(?<=\S)__|~~(?=\S)(.+?)(?<=\S)~~|(?<![\w*])\*(?=\S)([^*]+?)(?<=\S)\*(?![\w*])|(?<![\w_])_(?=\S)([^_]+?)(?<=\S)_(?![\w_])/g;

class Builder {
  text = '';
  readonly ranges: { start: number; length: number; style: SignalStyle }[] = [];

  add(text: string): void {
    this.text += text;
  }

  styled(style: SignalStyle, write: () => void): void {
    const start = this.text.length;
    write();
    if (this.text.length > start) this.ranges.push({ start, length: this.text.length - start, style });
  }

  inline(line: string): void {
    let at = 0;
    for (const match of line.matchAll(INLINE)) {
      this.add(line.slice(at, match.index));
      at = match.index + match[0].length;
      const [, code, label, url, bold1, bold2, strike, italic1, italic2] = match;
      if (code !== undefined) this.styled('MONOSPACE', () => this.add(code));
      else if (label !== undefined) this.add(`${label} (${url})`);
      else if (bold1 !== undefined || bold2 !== undefined) this.styled('BOLD', () => this.inline(bold1 ?? bold2!));
      else if (strike !== undefined) this.styled('STRIKETHROUGH', () => this.inline(strike));
      else this.styled('ITALIC', () => this.inline(italic1 ?? italic2!));
    }
    this.add(line.slice(at));
  }
}

/** An agent's Markdown as Signal text with its styles. */
export function markdownToSignal(markdown: string): StyledText {
  const out = new Builder();
  const lines = markdown.split('\n');
  for (let index = 0; index < lines.length; index++) {
    if (index > 0) out.add('\n');
    const line = lines[index]!;
    const fence = FENCE.exec(line);
    if (fence) {
      const marker = fence[2]!;
      const block = fencedBlock(lines, index, marker);
      const body = block.body;
      index = block.end;
      out.styled('MONOSPACE', () => out.add(body.join('\n')));
      continue;
    }
    const heading = /^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (heading) {
      out.styled('BOLD', () => out.inline(heading[1]!));
      continue;
    }
    const bullet = /^(\s*)[-*+]\s+(.*)$/.exec(line);
    if (bullet) {
      out.add(`${bullet[1]}• `);
      out.inline(bullet[2]!);
      continue;
    }
    out.inline(line);
  }
  return { text: out.text, styles: out.ranges.map((range) => `${range.start}:${range.length}:${range.style}`) };
}
