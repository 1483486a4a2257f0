/**
 * A Discord message as the gateway takes it: a person's message in a DM, or
 * in a channel where the agent may answer (addressed when it mentions the bot
 * or replies to it), with its attachments fetched from Discord's CDN.
 */
import type { APIMessage, APIUser } from 'discord-api-types/v10';
import type { Logger } from 'pino';
import type { InboundAttachment, InboundMessage } from '../../kernel/channel.ts';
import { readLimited } from '../attachments.ts';

const MAX_INBOUND_CHARS = 16_384;

/** Who reads a message: the account, its bot user, where it may answer, and where Discord is. */
export interface Reader {
  account: string;
  me?: APIUser;
  /** The channels the agent may answer in (channels.<id>.rooms). */
  rooms: string[];
  /** The configured apiRoot, read when a file is fetched. */
  apiRoot: () => string | undefined;
  log: Logger;
  /** A person wrote in their DM: their DM channel. */
  direct(user: string, channel: string): void;
  /** For a thread, the channel it is in (looked up before the message is read); undefined for any other channel. */
  parentOf(channel: string): string | undefined;
}

/** A message as an inbound one; undefined for what is not a person speaking, or a channel the agent may not answer in. */
export function inboundOf(message: APIMessage, reader: Reader): InboundMessage | undefined {
  if (!message || typeof message !== 'object' || typeof message.id !== 'string' || typeof message.channel_id !== 'string') return undefined;
  const author = message.author;
  if (!author || typeof author.id !== 'string' || author.bot || author.id === reader.me?.id) return undefined;
  // Default messages and replies: joins, pins, boosts and the like are not a person speaking.
  if (message.type !== 0 && message.type !== 19) return undefined;
  const attachments = attachmentsOf(message, reader.apiRoot);
  if (typeof message.content !== 'string' || (!message.content.trim() && attachments.length === 0)) return undefined;
  const text = message.content.length > MAX_INBOUND_CHARS ? message.content.slice(0, MAX_INBOUND_CHARS) : message.content;
  const at = Date.parse(message.timestamp) || Date.now();
  const base = {
    account: reader.account, sender: author.id, senderName: author.global_name ?? author.username ?? author.id, text, at, platformId: message.id, reference: message.id,
    ...(attachments.length ? { attachments } : {}),
  };
  const guild = (message as { guild_id?: string }).guild_id;
  if (!guild) {
    reader.direct(author.id, message.channel_id);
    return { ...base, kind: 'direct', replyTo: message.channel_id };
  }
  const rooms = reader.rooms;
  // A thread is a conversation of its own in the channel it belongs to (which says whether the agent may answer there).
  const parent = reader.parentOf(message.channel_id);
  const room = parent ?? message.channel_id;
  if (!rooms.includes('*') && !rooms.includes(room)) {
    reader.log.debug({ room: message.channel_id }, 'message in a Discord channel the agent may not answer in (channels.<id>.rooms); skipped');
    return undefined;
  }
  const botId = reader.me?.id;
  const mentioned = botId !== undefined && (message.mentions?.some((user) => user.id === botId) || text.includes(`<@${botId}>`) || text.includes(`<@!${botId}>`));
  const repliedTo = botId !== undefined && message.referenced_message?.author?.id === botId;
  const prompt = botId ? text.replace(new RegExp(`<@!?${botId}>`, 'g'), '').replace(/\s+/g, ' ').trim() : text;
  return {
    ...base, kind: 'group', room, ...(parent ? { thread: message.channel_id } : {}), replyTo: `${message.channel_id}/${message.id}`,
    ...(mentioned || repliedTo ? { addressed: { text: prompt || text } } : {}),
  };
}

/** Discord's message flag of a voice message. */
const IS_VOICE_MESSAGE = 1 << 13;

/** A message's attachments, fetched from Discord's CDN (or the configured apiRoot's host): no token goes with them. */
function attachmentsOf(message: APIMessage, apiRoot: () => string | undefined): InboundAttachment[] {
  if (!Array.isArray(message.attachments)) return [];
  // A voice message (its flag IS_VOICE_MESSAGE) carries its recording as its one attachment.
  const voice = typeof message.flags === 'number' && (message.flags & IS_VOICE_MESSAGE) !== 0;
  return message.attachments.filter((file) => file && typeof file === 'object' && typeof file.url === 'string').map((file, index) => ({
    name: typeof file.filename === 'string' ? file.filename : `file-${index + 1}`,
    mimeType: typeof file.content_type === 'string' ? file.content_type : undefined,
    size: typeof file.size === 'number' ? file.size : undefined,
    ...(voice ? { voice: true } : {}),
    fetch: async (maxBytes, signal) => {
      const url = new URL(file.url);
      if (!cdnHost(url, apiRoot())) throw new Error(`files are fetched only from Discord's CDN, not ${url.host}`);
      return readLimited(await globalThis.fetch(url, { signal }), maxBytes);
    },
  }));
}

function cdnHost(url: URL, root: string | undefined): boolean {
  if (root && new URL(root).origin === url.origin) return true;
  return url.protocol === 'https:' && ['cdn.discordapp.com', 'media.discordapp.net'].includes(url.hostname.toLowerCase());
}
