/**
 * What a Matrix account sends besides text: a reaction (an m.reaction
 * annotating the message), a file (put in the media store, then an m.image
 * or m.file message with its caption), and where a thread's replies go: a
 * conversation \"<room>/<thread root>\" is answered in that thread
 * (m.relates_to rel_type m.thread).
 */
import type { OutboundFile } from '../../kernel/channel.ts';

/** A room and, for a thread's conversation, its root event. */
export function threadOf(to: string): { room: string; thread?: string } {
  const [room, thread] = to.split('/') as [string, string | undefined];
  return { room, ...(thread ? { thread } : {}) };
}

/** What puts a message in a thread (with the fallback reply older clients show). */
export function inThread(thread: string | undefined): Record<string, unknown> {
  return thread ? { 'm.relates_to': { rel_type: 'm.thread', event_id: thread, is_falling_back: true, 'm.in_reply_to': { event_id: thread } } } : {};
}

export function reaction(event: string, emoji: string): Record<string, unknown> {
  return { 'm.relates_to': { rel_type: 'm.annotation', event_id: event, key: emoji } };
}

/**
 * The message that shows an uploaded file: an image as m.image, anything else as m.file; the caption is its body (Matrix 1.10).
 * Where it is: its mxc:// address, or (in an encrypted room) the encrypted file's `file`.
 */
export function fileMessage(file: OutboundFile, url: string | Record<string, unknown>, caption: string, thread: string | undefined): Record<string, unknown> {
  const image = file.mimeType.startsWith('image/');
  return {
    msgtype: image ? 'm.image' : 'm.file', body: caption.trim() || file.name, filename: file.name, ...(typeof url === 'string' ? { url } : { file: url }),
    info: { mimetype: file.mimeType, size: file.data.length }, 'm.mentions': {}, ...inThread(thread),
  };
}
