/**
 * Replies as chat apps show them: an agent writes Markdown; each app has its
 * own formatting and its own length limit. Splitting keeps a fenced code block
 * whole where it fits, and where it does not, closes it at the cut and opens
 * it again (with its language) in the next message.
 */

export const FENCE = /^(\s*)(`{3,}|~{3,})(.*)$/;

/** A fenced code block's lines, from the line after its opening fence (at `start`) to its closing fence (or the end), and where it ends. */
export function fencedBlock(lines: readonly string[], start: number, marker: string): { body: string[]; end: number } {
  const body: string[] = [];
  let index = start + 1;
  while (index < lines.length) {
    const close = FENCE.exec(lines[index]!);
    if (close && close[2]![0] === marker[0] && close[2]!.length >= marker.length && !close[3]!.trim()) break;
    body.push(lines[index]!);
    index++;
  }
  return { body, end: index };
}

/**
 * A mention of any of `names` in a room message: the name as a word of its
 * own (case-insensitive), an @ before it allowed, a : or , after it taken
 * with it.
 */
export function mentionPattern(names: readonly string[]): RegExp {
  const escaped = names.map((name) => name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
  return new RegExp(`(^|[^\\p{L}\\p{N}_])@?(?:${escaped.join('|')})[:,]?(?=$|[^\\p{L}\\p{N}_])`, 'iu');
}

/** A room message's text as the agent reads it: the mention `pattern` finds taken out, with the separator after it. */
export const withoutMention = (text: string, pattern: RegExp): string => text.replace(pattern, '$1').replace(/^\s*[:,]?\s*/, '').trim();

/** Splits text into messages of at most `limit` characters, at a paragraph, a line, a word, in that order of preference. */
export function splitMessage(text: string, limit: number): string[] {
  if (text.length <= limit) return [text];
  const parts: string[] = [];
  let rest = text;
  /** The fence open at the start of `rest` (from a cut inside a code block), to reopen. */
  let reopen = '';
  while (rest.length > 0) {
    const body = reopen + rest;
    if (body.length <= limit) {
      parts.push(body);
      break;
    }
    const take = (room: number) => {
      let cut = bestCut(body, room);
      if (cut <= reopen.length) cut = Math.max(room, reopen.length + 1);
      const piece = body.slice(0, cut).replace(/\s+$/, '');
      return { cut, piece, open: openFence(piece) };
    };
    let { cut, piece, open } = take(limit);
    // A cut inside a code block leaves room for the fence that closes it.
    if (open && piece.length + open.marker.length + 1 > limit) ({ cut, piece, open } = take(limit - open.marker.length - 1));
    if (open) piece += `\n${open.marker}`;
    parts.push(piece);
    rest = body.slice(cut).replace(/^\n+/, '');
    reopen = open ? `${open.marker}${open.info}\n` : '';
  }
  return parts.filter((part) => part.trim().length > 0);
}

function bestCut(text: string, room: number): number {
  const window = text.slice(0, room + 1);
  for (const separator of ['\n\n', '\n', ' ']) {
    const at = window.lastIndexOf(separator);
    // A cut too early would make many small messages: take it only past a third of the room.
    if (at > room / 3) return at + separator.length;
  }
  return room;
}

/** The fence left open at the end of a piece of Markdown, if any. */
function openFence(text: string): { marker: string; info: string } | undefined {
  let open: { marker: string; info: string } | undefined;
  for (const line of text.split('\n')) {
    const match = FENCE.exec(line);
    if (!match) continue;
    const marker = match[2]!;
    if (!open) open = { marker, info: match[3]!.trim() };
    else if (marker[0] === open.marker[0] && marker.length >= open.marker.length && !match[3]!.trim()) open = undefined;
  }
  return open;
}

const escapeHtml = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/**
 * Markdown as Telegram's HTML parse mode takes it: code blocks, inline code,
 * bold, italic, strikethrough, links, headings (bold), quotes and lists.
 * Everything else is text, escaped.
 */
export function markdownToTelegramHtml(markdown: string): string {
  const out: string[] = [];
  const lines = markdown.split('\n');
  let quote: string[] = [];
  const flushQuote = () => {
    if (quote.length) out.push(`<blockquote>${quote.join('\n')}</blockquote>`);
    quote = [];
  };
  for (let index = 0; index < lines.length; index++) {
    const line = lines[index]!;
    const fence = FENCE.exec(line);
    if (fence) {
      flushQuote();
      const marker = fence[2]!;
      const language = fence[3]!.trim().split(/\s+/)[0] ?? '';
      const block = fencedBlock(lines, index, marker);
      const body = block.body;
      index = block.end;
      const code = escapeHtml(body.join('\n'));
      out.push(language && /^[\w+#.-]{1,32}$/.test(language) ? `<pre><code class="language-${language}">${code}</code></pre>` : `<pre>${code}</pre>`);
      continue;
    }
    const quoted = /^\s*>\s?(.*)$/.exec(line);
    if (quoted) {
      quote.push(inlineHtml(quoted[1]!));
      continue;
    }
    flushQuote();
    const heading = /^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (heading) {
      out.push(`<b>${inlineHtml(heading[1]!)}</b>`);
      continue;
    }
    const bullet = /^(\s*)[-*+]\s+(.*)$/.exec(line);
    if (bullet) {
      out.push(`${bullet[1]}• ${inlineHtml(bullet[2]!)}`);
      continue;
    }
    out.push(inlineHtml(line));
  }
  flushQuote();
  return out.join('\n');
}

/** One line's inline Markdown as Telegram HTML: code spans first (nothing inside them is formatting), then links, bold, italic, strikethrough. */
function inlineHtml(line: string): string {
  const spans: string[] = [];
  const hold = (html: string) => `\u0000${spans.push(html) - 1}\u0000`;
  let text = line.replace(/`([^`]+)`/g, (_, code: string) => hold(`<code>${escapeHtml(code)}</code>`));
  text = text.replace(/\[([^\]]+)\]\((https?:\/\/[^\s)]+)\)/g, (_, label: string, url: string) => hold(`<a href="${escapeHtml(url).replace(/"/g, '&quot;')}">${escapeHtml(label)}</a>`));
  text = escapeHtml(text);
  text = text.replace(/\*\*(?=\S)(.+?)(?<=\S)\*\*|__(?=\S)(.+?)(?<=\S)__/g, (_, a?: string, b?: string) => `<b>${a ?? b}</b>`);
  text = text.replace(/(^|[^\w*])\*(?=\S)([^*]+?)(?<=\S)\*(?!\w)|(^|[^\w])_(?=\S)([^_]+?)(?<=\S)_(?!\w)/g,
    (_, before1?: string, a?: string, before2?: string, b?: string) => `${before1 ?? before2 ?? ''}<i>${a ?? b}</i>`);
  text = text.replace(/~~(?=\S)(.+?)(?<=\S)~~/g, '<s>$1</s>');
  return text.replace(/\u0000(\d+)\u0000/g, (_, index: string) => spans[Number(index)]!);
}

/** Markdown without its markup, for an app that would show it raw (a fallback when formatting is refused). */
export function plainText(markdown: string): string {
  return markdown
    .replace(/^(\s*)(`{3,}|~{3,}).*$/gm, '')
    .replace(/`([^`]+)`/g, '$1')
    .replace(/\[([^\]]+)\]\((https?:\/\/[^\s)]+)\)/g, '$1 ($2)')
    .replace(/\*\*(.+?)\*\*|__(.+?)__/g, '$1$2')
    .replace(/^\s{0,3}#{1,6}\s+/gm, '');
}

const escapeSlack = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/**
 * Markdown as Slack's mrkdwn: *bold*, _italic_, ~strike~, `code`, code
 * blocks (without their language, which Slack does not show), <url|links>,
 * headings as bold lines, quotes and lists. &, < and > are escaped, so text
 * never turns into a mention or a link by accident.
 */
export function markdownToSlackMrkdwn(markdown: string): string {
  const out: string[] = [];
  const lines = markdown.split('\n');
  for (let index = 0; index < lines.length; index++) {
    const line = lines[index]!;
    const fence = FENCE.exec(line);
    if (fence) {
      const marker = fence[2]!;
      const block = fencedBlock(lines, index, marker);
      const body = block.body;
      index = block.end;
      out.push(`\`\`\`\n${escapeSlack(body.join('\n'))}\n\`\`\``);
      continue;
    }
    const quoted = /^\s*>\s?(.*)$/.exec(line);
    if (quoted) {
      out.push(`&gt; ${inlineSlack(quoted[1]!)}`);
      continue;
    }
    const heading = /^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (heading) {
      out.push(`*${inlineSlack(heading[1]!)}*`);
      continue;
    }
    const bullet = /^(\s*)[-*+]\s+(.*)$/.exec(line);
    if (bullet) {
      out.push(`${bullet[1]}• ${inlineSlack(bullet[2]!)}`);
      continue;
    }
    out.push(inlineSlack(line));
  }
  return out.join('\n');
}

function inlineSlack(line: string): string {
  const spans: string[] = [];
  const hold = (text: string) => `\u0000${spans.push(text) - 1}\u0000`;
  let text = line.replace(/`([^`]+)`/g, (_, code: string) => hold(`\`${escapeSlack(code)}\``));
  text = text.replace(/\[([^\]]+)\]\((https?:\/\/[^\s)|>]+)\)/g, (_, label: string, url: string) => hold(`<${url.replace(/&/g, '&amp;')}|${escapeSlack(label).replace(/\|/g, '¦')}>`));
  text = escapeSlack(text);
  // Bold first, held aside, so its stars are not taken for italics.
  text = text.replace(/\*\*(?=\S)(.+?)(?<=\S)\*\*|__(?=\S)(.+?)(?<=\S)__/g, (_, a?: string, b?: string) => hold(`*${a ?? b}*`));
  text = text.replace(/(^|[^\w*])\*(?=\S)([^*]+?)(?<=\S)\*(?!\w)/g, (_, before: string, body: string) => `${before}_${body}_`);
  text = text.replace(/~~(?=\S)(.+?)(?<=\S)~~/g, '~$1~');
  // Held spans may hold others (a link inside bold): put them back until none is left.
  while (/\u0000\d+\u0000/.test(text)) text = text.replace(/\u0000(\d+)\u0000/g, (_, index: string) => spans[Number(index)]!);
  return text;
}
