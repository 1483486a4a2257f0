/**
 * A Telegram update as the gateway takes it: a text (or caption) message,
 * with its files, from a person in a private chat, or in a group where the
 * agent may answer (addressed when it names the bot or replies to it).
 */
import type { Update, UserFromGetMe } from 'grammy/types';
import type { Logger } from 'pino';
import type { InboundAttachment, InboundMessage } from '../../kernel/channel.ts';

/** Longest text taken from one inbound message; Telegram's own limit, with room for a caption. */
const MAX_INBOUND_CHARS = 16_384;

type Message = NonNullable<Update['message']>;

/** Who reads an update: the account, its bot, where it may answer, and how to fetch a file. */
export interface Reader {
  account: string;
  me?: UserFromGetMe;
  /** Group chat ids the agent may answer in ("*": any). */
  rooms: string[];
  /** The channel's maxAttachmentBytes: a photo comes in the largest size that fits. */
  maxAttachmentBytes: number;
  log: Logger;
  /** A file's bytes by its id, up to `maxBytes`. */
  download(fileId: string, maxBytes: number, signal: AbortSignal): Promise<Uint8Array>;
}

/** A user as people know them: @username, else their name. */
const displayName = (user: { username?: string; first_name?: string; last_name?: string; id: number }) =>
  user.username ? `@${user.username}` : [user.first_name, user.last_name].filter(Boolean).join(' ') || String(user.id);

/** An update as an inbound message; undefined for what is not a person speaking, or a group the agent may not answer in. */
export function inboundOf(update: Update, reader: Reader): InboundMessage | undefined {
  const message = update.message;
  if (typeof update.update_id !== 'number') return undefined;
  if (!message || typeof message !== 'object' || !message.chat || !message.from || message.from.is_bot) {
    reader.log.debug({ update: update.update_id }, 'update without a message from a person; skipped');
    return undefined;
  }
  const raw = message.text ?? message.caption ?? '';
  const attachments = attachmentsOf(message, reader);
  if (typeof raw !== 'string' || (!raw.trim() && attachments.length === 0)) {
    reader.log.debug({ update: update.update_id, chat: message.chat.type }, 'message without text or files; skipped');
    return undefined;
  }
  const text = raw.length > MAX_INBOUND_CHARS ? raw.slice(0, MAX_INBOUND_CHARS) : raw;
  const base = {
    account: reader.account, sender: String(message.from.id), senderName: displayName(message.from), text,
    at: typeof message.date === 'number' ? message.date * 1000 : Date.now(), platformId: String(update.update_id), reference: String(message.message_id),
    ...(attachments.length ? { attachments } : {}),
  };
  if (message.chat.type === 'private') return { ...base, kind: 'direct', replyTo: String(message.chat.id) };
  if (message.chat.type !== 'group' && message.chat.type !== 'supergroup') return undefined;
  const room = String(message.chat.id);
  const rooms = reader.rooms;
  if (!rooms.includes('*') && !rooms.includes(room)) {
    reader.log.debug({ chat: room }, 'message in a group the agent may not answer in (channels.<id>.rooms); skipped');
    return undefined;
  }
  // A forum topic is a conversation of its own, answered in the topic.
  const topic = message.is_topic_message && typeof message.message_thread_id === 'number' ? String(message.message_thread_id) : undefined;
  return { ...base, kind: 'group', room, ...(topic ? { thread: topic, replyTo: `${room}/${topic}` } : {}), ...addressing(message, text, reader.me) };
}

/**
 * The files of a message: its photo (the largest size that fits the
 * channel's limit), document, audio, voice note or video, fetched through
 * getFile and the Bot API's file address when the gateway keeps them.
 */
function attachmentsOf(message: Message, reader: Reader): InboundAttachment[] {
  const found: { fileId: string; name: string; mimeType?: string; size?: number; voice?: boolean }[] = [];
  const limit = reader.maxAttachmentBytes;
  if (Array.isArray(message.photo) && message.photo.length > 0) {
    const sizes = message.photo.filter((size) => typeof size?.file_id === 'string');
    const fitting = sizes.filter((size) => (size.file_size ?? 0) <= limit);
    const photo = (fitting.length ? fitting : sizes).at(-1);
    if (photo) found.push({ fileId: photo.file_id, name: 'photo.jpg', mimeType: 'image/jpeg', size: photo.file_size });
  }
  for (const [field, fallback] of [['document', 'document'], ['audio', 'audio'], ['voice', 'voice.ogg'], ['video', 'video.mp4'], ['animation', 'animation.mp4']] as const) {
    const file = (message as unknown as Record<string, unknown>)[field] as { file_id?: unknown; file_name?: string; mime_type?: string; file_size?: number } | undefined;
    if (file && typeof file.file_id === 'string') {
      found.push({ fileId: file.file_id, name: file.file_name ?? fallback, mimeType: file.mime_type, size: file.file_size, ...(field === 'voice' ? { voice: true } : {}) });
    }
  }
  return found.map((file) => ({
    name: file.name, mimeType: file.mimeType, size: file.size, ...(file.voice ? { voice: true } : {}),
    fetch: (maxBytes, signal) => reader.download(file.fileId, maxBytes, signal),
  }));
}

/** Whether a group message is for the bot: it names it (@bot) or replies to it. The prompt is the text without the mention. */
function addressing(message: Message, text: string, me: UserFromGetMe | undefined): Pick<InboundMessage, 'addressed'> {
  const username = me?.username;
  if (!username) return {};
  const mention = `@${username}`.toLowerCase();
  const entities = message.entities ?? message.caption_entities ?? [];
  const named = entities.some((entity) => entity.type === 'mention' && text.slice(entity.offset, entity.offset + entity.length).toLowerCase() === mention)
    || entities.some((entity) => entity.type === 'text_mention' && entity.user?.id === me?.id);
  const repliedTo = message.reply_to_message?.from?.id === me?.id;
  if (!named && !repliedTo) return { addressed: undefined };
  const prompt = text.replace(new RegExp(`@${username}\\b`, 'ig'), '').replace(/\s+/g, ' ').trim();
  return { addressed: { text: prompt || text } };
}

