/**
 * Replies as WhatsApp shows them: an agent writes Markdown; WhatsApp has its
 * own markup (*bold*, _italic_, ~strike~, `code`, ```blocks```, "> " quotes,
 * "- " lists) and takes at most 4,096 characters in a text message. A line
 * that is only a Markdown image of an https address (`![caption](https://…)`)
 * goes as a media message of its own, which Meta fetches from there: an
 * image, video, audio or document by the address's extension.
 */
import { splitMessage } from '../formatting.ts';

/** WhatsApp's longest text message. */
export const WHATSAPP_LIMIT = 4096;
/** The longest caption a media message takes. */
const CAPTION_LIMIT = 1024;

const FENCE = /^\s*(`{3,}|~{3,})/;
const MEDIA_LINE = /^\s*!\[([^\]\n]*)\]\((https:\/\/[^\s()]+)\)\s*$/;
/** One emoji (with its modifiers and joined parts), as a reaction takes. */
const ONE_EMOJI = /^\p{Extended_Pictographic}(?:\uFE0F|\p{Emoji_Modifier}|\u200D\p{Extended_Pictographic}\uFE0F?)*$|^(?:\p{Regional_Indicator}){2}$/u;

/** The kinds of media message, by an address's extension; anything else is a document. */
const KIND_BY_EXTENSION: Partial<Record<string, 'image' | 'video' | 'audio'>> = {
  jpg: 'image', jpeg: 'image', png: 'image',
  mp4: 'video', '3gp': 'video',
  mp3: 'audio', m4a: 'audio', aac: 'audio', amr: 'audio', ogg: 'audio', opus: 'audio',
};

/**
 * Splits a reply into the messages WhatsApp takes: each media line alone,
 * the text between them in pieces of at most 4,096 characters (code blocks
 * kept whole where they fit). A fenced code block is never read for media.
 */
export function splitReply(text: string): string[] {
  const parts: string[] = [];
  let run: string[] = [];
  let fence: string | undefined;
  const flush = () => {
    const chunk = run.join('\n');
    if (chunk.trim()) parts.push(...splitMessage(chunk.replace(/^\n+|\n+$/g, ''), WHATSAPP_LIMIT));
    run = [];
  };
  for (const line of text.split('\n')) {
    const marker = FENCE.exec(line)?.[1];
    if (marker) {
      if (fence === undefined) fence = marker;
      else if (marker[0] === fence[0] && marker.length >= fence.length) fence = undefined;
    }
    if (fence === undefined && !marker && MEDIA_LINE.test(line)) {
      flush();
      parts.push(line.trim());
      continue;
    }
    run.push(line);
  }
  flush();
  return parts.length ? parts : [text];
}

/**
 * The body of one part for the messages endpoint: a media message for a
 * media line, a reaction for one emoji sent to a message (`context`), else
 * text in WhatsApp's markup (quoting `context` when there is one).
 */
export function messageBody(part: string, context?: string): Record<string, unknown> {
  const media = MEDIA_LINE.exec(part);
  if (media) {
    const [, caption, link] = media as unknown as [string, string, string];
    const path = new URL(link).pathname;
    const file = decodeURIComponent(path.split('/').pop() ?? '');
    const kind = KIND_BY_EXTENSION[/\.([a-z0-9]{1,5})$/i.exec(path)?.[1]?.toLowerCase() ?? ''] ?? 'document';
    const text = caption.trim().slice(0, CAPTION_LIMIT);
    // Audio takes no caption.
    const details = { link, ...(text && kind !== 'audio' ? { caption: text } : {}), ...(kind === 'document' && file ? { filename: file.slice(0, 240) } : {}) };
    return { type: kind, [kind]: details, ...(context ? { context: { message_id: context } } : {}) };
  }
  if (context && ONE_EMOJI.test(part.trim())) return { type: 'reaction', reaction: { message_id: context, emoji: part.trim() } };
  return { type: 'text', text: { body: markdownToWhatsApp(part), preview_url: false }, ...(context ? { context: { message_id: context } } : {}) };
}

/**
 * Markdown in WhatsApp's markup: **bold** and __bold__ as *bold*, *italic*
 * as _italic_, ~~strike~~ as ~strike~, headings as bold lines, links as
 * "text (address)", "- " lists, quotes and code as they are (WhatsApp
 * reads them); a code block without its language, which WhatsApp would show.
 */
export function markdownToWhatsApp(markdown: string): string {
  const out: string[] = [];
  const lines = markdown.split('\n');
  for (let index = 0; index < lines.length; index++) {
    const line = lines[index]!;
    const fence = /^\s*(`{3,}|~{3,})(.*)$/.exec(line);
    if (fence) {
      const marker = fence[1]!;
      const body: string[] = [];
      index++;
      while (index < lines.length) {
        const close = /^\s*(`{3,}|~{3,})(.*)$/.exec(lines[index]!);
        if (close && close[1]![0] === marker[0] && close[1]!.length >= marker.length && !close[2]!.trim()) break;
        body.push(lines[index]!);
        index++;
      }
      out.push(`\`\`\`\n${body.join('\n')}\n\`\`\``);
      continue;
    }
    const heading = /^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (heading) {
      out.push(`*${inline(heading[1]!).replace(/^\*(.*)\*$/, '$1')}*`);
      continue;
    }
    const bullet = /^(\s*)[*+]\s+(.*)$/.exec(line);
    if (bullet) {
      out.push(`${bullet[1]}- ${inline(bullet[2]!)}`);
      continue;
    }
    out.push(inline(line));
  }
  return out.join('\n');
}

function inline(line: string): string {
  const spans: string[] = [];
  const hold = (text: string) => `\u0000${spans.push(text) - 1}\u0000`;
  let text = line.replace(/`([^`]+)`/g, (_, code: string) => hold(`\`${code}\``));
  text = text.replace(/\[([^\]]+)\]\((https?:\/\/[^\s)]+)\)/g, (_, label: string, url: string) => hold(label === url ? url : `${label} (${url})`));
  // Bold first, held aside, so its stars are not taken for italics.
  text = text.replace(/\*\*(?=\S)(.+?)(?<=\S)\*\*|__(?=\S)(.+?)(?<=\S)__/g, (_, a?: string, b?: string) => hold(`*${a ?? b}*`));
  text = text.replace(/(^|[^\w*])\*(?=\S)([^*]+?)(?<=\S)\*(?!\w)/g, (_, before: string, body: string) => `${before}_${body}_`);
  text = text.replace(/~~(?=\S)(.+?)(?<=\S)~~/g, '~$1~');
  while (/\u0000\d+\u0000/.test(text)) text = text.replace(/\u0000(\d+)\u0000/g, (_, index: string) => spans[Number(index)]!);
  return text;
}
