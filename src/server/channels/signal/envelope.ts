/**
 * What signal-cli hands over for each envelope it received (an item of the
 * `receive` method's result, or the data of a `receive` event): a person's
 * message becomes what the gateway takes in; everything else (receipts,
 * typing, edits, reactions, group updates, stories, what the account sent
 * from another device, what signal-cli could not decrypt) is named and let
 * go. Nothing in it is trusted to have the shape signal-cli documents.
 */
import { ACI, GROUP_ID, PHONE } from './peers.ts';

/** Longest text taken from one message (Signal sends a long one as a text attachment signal-cli reads for us). */
export const MAX_INBOUND_CHARS = 16_384;
/** Files taken from one message at most (Signal allows 32). */
const MAX_FILES = 32;
/** Signal's stand-in for a mention in a message's text: each mention's range covers one. */
const MENTION = '\uFFFC';

/**
 * A file sent with a message, as signal-cli keeps it (fetched with
 * getAttachment). `voice`: a recording made in the app (audio sent without a
 * file name: signal-cli's JSON does not pass on Signal's voice-message flag).
 */
export interface SignalFile { id: string; name: string; contentType?: string; size?: number; voice?: boolean }

/** A person's message to the account (directly or in a group). */
export interface SignalMessage {
  /** Signal's identity of a message: its sender's account and its timestamp (receipts and quotes name it so). */
  id: string;
  timestamp: number;
  /** The sender as the gateway knows them: their number when Signal shows it, else their ACI. */
  sender: string;
  /** Where a receipt or a direct reply reaches them (their ACI when known: it never changes). */
  address: string;
  senderName: string;
  text: string;
  /** The group it was said in. */
  group?: string;
  /** It mentions the account or quotes one of its messages: it is for the agent. */
  addressed: boolean;
  /** The text without the account's own mentions, for an agent to read. */
  addressedText: string;
  files: SignalFile[];
}

/** Who the account is: its number, and its ACI once learned (mentions may name only that). */
export interface Self { number: string; aci?: string }

export type Reading = { message: SignalMessage } | { skip: string; otherAccount?: string };

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);
const stringOf = (value: unknown, pattern?: RegExp): string | undefined => (typeof value === 'string' && (!pattern || pattern.test(value)) ? value : undefined);
const aciOf = (value: unknown): string | undefined => stringOf(typeof value === 'string' ? value.toLowerCase() : value, ACI);
const isTimestamp = (value: unknown): value is number => typeof value === 'number' && Number.isSafeInteger(value) && value > 0;

/** Reads one received item (`{account, envelope, exception?}`). */
export function readReceived(item: unknown, self: Self): Reading {
  if (!isObject(item) || !isObject(item.envelope)) return { skip: 'not an envelope' };
  if (typeof item.account === 'string' && item.account !== self.number) return { skip: `an envelope for ${item.account.slice(0, 32)}`, otherAccount: item.account.slice(0, 32) };
  const envelope = item.envelope;
  const number = stringOf(envelope.sourceNumber, PHONE);
  const aci = aciOf(envelope.sourceUuid);
  const sender = number ?? aci;
  if (!sender) return { skip: 'an envelope without a sender' };
  if (sender === self.number || (aci !== undefined && aci === self.aci)) return { skip: 'the account\'s own message (from another of its devices)' };
  const data = envelope.dataMessage;
  if (!isObject(data)) {
    if (isObject(item.exception)) return { skip: `an envelope signal-cli could not read (${stringOf(item.exception.message)?.slice(0, 200) ?? 'no reason given'})` };
    const kind = ['editMessage', 'syncMessage', 'receiptMessage', 'typingMessage', 'storyMessage', 'callMessage'].find((key) => envelope[key] !== undefined && envelope[key] !== null);
    return { skip: kind ? `a ${kind.replace('Message', '')} envelope` : 'an envelope without a message' };
  }
  const timestamp = isTimestamp(envelope.timestamp) ? envelope.timestamp : isTimestamp(data.timestamp) ? data.timestamp : undefined;
  if (timestamp === undefined) return { skip: 'a message without a timestamp' };
  for (const key of ['reaction', 'remoteDelete', 'pollVote', 'pollTerminate', 'pinMessage', 'unpinMessage', 'adminDelete', 'payment']) {
    if (data[key] !== undefined && data[key] !== null) return { skip: `a ${key.replace(/([A-Z])/g, ' $1').toLowerCase()}` };
  }
  if (data.isExpirationUpdate === true) return { skip: 'a change of the disappearing-messages timer' };
  let group: string | undefined;
  if (data.groupInfo !== undefined && data.groupInfo !== null) {
    if (!isObject(data.groupInfo)) return { skip: 'a group message without a group' };
    group = stringOf(data.groupInfo.groupId, GROUP_ID);
    if (!group) return { skip: 'a group message without a valid group id' };
    if (data.groupInfo.type === 'UPDATE') return { skip: 'a change to the group' };
  }
  if (data.message !== undefined && data.message !== null && typeof data.message !== 'string') return { skip: 'a message whose text is not text' };
  // The marker of the account's own mentions is NUL-delimited: no NUL of the sender's may pose as one.
  const raw = ((data.message as string | null | undefined) ?? '').replace(/\u0000/g, '');
  const files = filesOf(data.attachments);
  const { text, mine } = withMentions(raw, data.mentions, self);
  if (!text.trim() && files.length === 0) return { skip: data.sticker ? 'a sticker' : 'a message without text or files' };
  const quote = isObject(data.quote) ? data.quote : undefined;
  const quotesMe = quote !== undefined && ((quote.authorNumber !== undefined && quote.authorNumber === self.number) || (self.aci !== undefined && aciOf(quote.authorUuid) === self.aci));
  const name = stringOf(envelope.sourceName)?.replace(/[\u0000-\u001f\u007f]/g, '').trim().slice(0, 100);
  const clip = (value: string) => (value.length > MAX_INBOUND_CHARS ? value.slice(0, MAX_INBOUND_CHARS) : value);
  return {
    message: {
      id: `${aci ?? sender}:${timestamp}`, timestamp, sender, address: aci ?? sender, senderName: name || sender,
      text: clip(mine ? text.replaceAll(mine, `@${self.number}`) : text),
      ...(group ? { group } : {}),
      addressed: mine !== '' || quotesMe,
      addressedText: clip((mine ? text.replaceAll(mine, '') : text).replace(/[ \t]{2,}/g, ' ').replace(/^\s*[:,]\s*/, '').trim()),
      files,
    },
  };
}

/**
 * The text with each mention's placeholder as the person it names (@number,
 * or @ACI), and the account's own as `mine`: a marker the caller takes out.
 * A mention whose range does not cover a placeholder is left alone.
 */
function withMentions(raw: string, mentions: unknown, self: Self): { text: string; mine: string } {
  const mine = '\u0000me\u0000';
  if (!Array.isArray(mentions)) return { text: raw.replaceAll(MENTION, ''), mine: '' };
  const valid = mentions.filter(isObject)
    .filter((mention) => Number.isSafeInteger(mention.start) && Number.isSafeInteger(mention.length) && (mention.start as number) >= 0 && (mention.length as number) >= 1
      && raw.slice(mention.start as number, (mention.start as number) + (mention.length as number)).includes(MENTION))
    .sort((a, b) => (b.start as number) - (a.start as number));
  let text = raw;
  let last = Number.POSITIVE_INFINITY;
  for (const mention of valid) {
    const start = mention.start as number;
    const end = start + (mention.length as number);
    // Overlapping ranges are not two mentions: the later one is read, the other left as it is.
    if (end > last) continue;
    last = start;
    const number = stringOf(mention.number, PHONE);
    const aci = aciOf(mention.uuid);
    const isMe = number === self.number || (aci !== undefined && aci === self.aci);
    text = text.slice(0, start) + (isMe ? mine : `@${number ?? aci ?? 'someone'}`) + text.slice(end);
  }
  return { text: text.replaceAll(MENTION, ''), mine: text.includes(mine) ? mine : '' };
}

function filesOf(attachments: unknown): SignalFile[] {
  if (!Array.isArray(attachments)) return [];
  const files: SignalFile[] = [];
  for (const [index, attachment] of attachments.slice(0, MAX_FILES).entries()) {
    if (!isObject(attachment)) continue;
    // An id is a file name in signal-cli's attachments folder: nothing that could name another folder.
    const id = stringOf(attachment.id, /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$/);
    if (!id || id.includes('..')) continue;
    const contentType = stringOf(attachment.contentType, /^[\w.+-]{1,64}\/[\w.+-]{1,128}$/);
    const size = typeof attachment.size === 'number' && Number.isSafeInteger(attachment.size) && attachment.size >= 0 ? attachment.size : undefined;
    const filename = stringOf(attachment.filename)?.slice(0, 200);
    const voice = !filename && contentType?.startsWith('audio/') === true;
    files.push({ id, name: filename || defaultName(contentType, index), ...(contentType ? { contentType } : {}), ...(size !== undefined ? { size } : {}), ...(voice ? { voice } : {}) });
  }
  return files;
}

/** A name for a file sent without one (a photo taken in the app): its kind and the extension its type suggests. */
function defaultName(contentType: string | undefined, index: number): string {
  const [kind, subtype] = (contentType ?? 'application/octet-stream').split('/') as [string, string];
  const extension = ({ jpeg: 'jpg', png: 'png', gif: 'gif', webp: 'webp', mp4: 'mp4', aac: 'aac', mpeg: 'mp3', ogg: 'ogg', pdf: 'pdf', plain: 'txt' } as Record<string, string>)[subtype];
  const base = kind === 'image' ? 'photo' : kind === 'audio' ? 'voice' : kind === 'video' ? 'video' : `file-${index + 1}`;
  return extension ? `${base}.${extension}` : base;
}
