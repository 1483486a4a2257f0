/**
 * A Slack event as the gateway takes it: a person's message (or a file they
 * shared) in a direct conversation, or in a channel where the agent may
 * answer (addressed when it mentions the bot; answered in the thread of the
 * message), with its files fetched from Slack with the bot token.
 */
import type { Logger } from 'pino';
import type { InboundAttachment, InboundMessage } from '../../kernel/channel.ts';
import { readLimited } from '../attachments.ts';

const MAX_INBOUND_CHARS = 40_000;

/** A Slack event as far as the gateway reads it. */
export interface SlackEvent {
  type?: string;
  subtype?: string;
  channel?: string;
  channel_type?: string;
  user?: string;
  bot_id?: string;
  text?: string;
  ts?: string;
  thread_ts?: string;
  files?: { id?: string; name?: string; mimetype?: string; size?: number; subtype?: string; url_private?: string; url_private_download?: string }[];
}

/** Who reads an event: the account, its bot user, where it may answer, people's names, and how to fetch files. */
export interface Reader {
  account: string;
  botUserId?: string;
  /** The channels the agent may answer in (channels.<id>.rooms). */
  rooms: string[];
  log: Logger;
  /** A user's display name, when known; looked up for the next messages otherwise. */
  nameOf(user: string): string | undefined;
  learnName(user: string): void;
  /** The configured apiRoot and the bot token, read when a file is fetched. */
  apiRoot(): string | undefined;
  botToken(): string | undefined;
}

/** An event as an inbound message; undefined for what is not a person speaking, or a channel the agent may not answer in. */
export function inboundOf(event: SlackEvent | undefined, reader: Reader): InboundMessage | undefined {
  if (!event || typeof event !== 'object' || (event.type !== 'message' && event.type !== 'app_mention')) return undefined;
  // Edits, joins, the bot's own and other bots' messages are not a person speaking.
  // A message that shares files (file_share) is a person speaking too.
  if ((event.subtype && event.subtype !== 'file_share') || event.bot_id || !event.user || event.user === reader.botUserId) return undefined;
  const attachments = attachmentsOf(event, reader);
  if (typeof event.channel !== 'string' || typeof event.ts !== 'string' || typeof (event.text ?? '') !== 'string') return undefined;
  const raw = event.text ?? '';
  if (!raw.trim() && attachments.length === 0) return undefined;
  const text = raw.length > MAX_INBOUND_CHARS ? raw.slice(0, MAX_INBOUND_CHARS) : raw;
  const at = Math.round(Number(event.ts) * 1000) || Date.now();
  const base = {
    account: reader.account, sender: event.user, senderName: reader.nameOf(event.user) ?? event.user, text, at,
    // A mention comes twice (message and app_mention), under one message: its channel and ts.
    platformId: `${event.channel}:${event.ts}`, reference: event.ts,
    ...(attachments.length ? { attachments } : {}),
  };
  reader.learnName(event.user);
  // A reply in a thread is a conversation of its own, answered in the thread.
  const thread = typeof event.thread_ts === 'string' && event.thread_ts !== event.ts ? { thread: event.thread_ts } : {};
  if (event.channel_type === 'im' || event.channel.startsWith('D')) {
    return { ...base, kind: 'direct', ...thread, replyTo: thread.thread ? `${event.channel}/${thread.thread}` : event.channel };
  }
  const rooms = reader.rooms;
  if (!rooms.includes('*') && !rooms.includes(event.channel)) {
    reader.log.debug({ room: event.channel }, 'message in a Slack channel the agent may not answer in (channels.<id>.rooms); skipped');
    return undefined;
  }
  const mention = reader.botUserId ? `<@${reader.botUserId}>` : undefined;
  const addressed = mention !== undefined && text.includes(mention);
  // The answer goes in the thread of the message it answers.
  return {
    ...base, kind: 'group', room: event.channel, ...thread, replyTo: `${event.channel}/${event.thread_ts ?? event.ts}`,
    ...(addressed ? { addressed: { text: text.split(mention).join('').replace(/\s+/g, ' ').trim() || text } } : {}),
  };
}

/**
 * The files shared with a message, fetched from their private address with
 * the bot token (which needs the files:read scope), only from Slack's own
 * hosts (or the configured apiRoot's): the token goes nowhere else.
 */
function attachmentsOf(event: SlackEvent, reader: Reader): InboundAttachment[] {
  if (!Array.isArray(event.files)) return [];
  return event.files.filter((file) => file && typeof file === 'object').map((file, index) => ({
    name: typeof file.name === 'string' ? file.name : `file-${index + 1}`,
    mimeType: typeof file.mimetype === 'string' ? file.mimetype : undefined,
    size: typeof file.size === 'number' ? file.size : undefined,
    // An audio clip recorded in Slack.
    ...(file.subtype === 'slack_audio' ? { voice: true } : {}),
    fetch: async (maxBytes, signal) => {
      const address = file.url_private_download ?? file.url_private;
      if (typeof address !== 'string') throw new Error('Slack gave no address for it');
      const url = new URL(address);
      if (!slackHost(url, reader.apiRoot())) throw new Error(`files are fetched only from Slack, not ${url.host}`);
      const token = reader.botToken();
      if (!token) throw new Error('the app is not connected');
      const response = await globalThis.fetch(url, { headers: { authorization: `Bearer ${token}` }, signal });
      // Without files:read Slack answers with its sign-in page.
      if ((response.headers.get('content-type') ?? '').startsWith('text/html') && !String(file.mimetype).startsWith('text/html')) {
        await response.body?.cancel().catch(() => undefined);
        throw new Error('Slack answered with its sign-in page: give the app the files:read scope');
      }
      return readLimited(response, maxBytes);
    },
  }));
}

function slackHost(url: URL, root: string | undefined): boolean {
  if (root && new URL(root).origin === url.origin) return true;
  const host = url.hostname.toLowerCase();
  return url.protocol === 'https:' && ['slack.com', 'slack-gov.com'].some((domain) => host === domain || host.endsWith(`.${domain}`));
}
