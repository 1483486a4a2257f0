/**
 * What a mail says, as the email channel reads and answers it: addresses and
 * where a reply goes (a mailto: address whose fields thread it), the loop
 * guard, the reply's own text without the quote below it, and a raw message
 * made an inbound one.
 *
 * Who a message is from is its envelope sender, as the receiving server
 * recorded it (Return-Path): a From header that says otherwise is shown, never
 * believed. The gateway checks no DKIM signature; a server that checks them
 * (and SPF) and refuses what fails is what makes the envelope sender worth
 * trusting. Mail that is auto-submitted, bulk, a bounce or the account's own
 * is never answered, so two robots cannot mail each other forever.
 */
import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type { InboundAttachment, InboundMessage } from '../../kernel/channel.ts';

/** Longest text taken from one message. */
const MAX_INBOUND_CHARS = 32_768;
/** At most this many ids of a thread go in a reply's References: the first (the thread's root) and the latest. */
const MAX_REFERENCES = 10;

export const ADDRESS = /^[^@\s<>]{1,128}@[^@\s<>]{1,255}$/;
/** An address as a peer: lower case (the local part is case-sensitive in theory, never in practice). */
export const addressOf = (value: string) => value.trim().toLowerCase();

/**
 * Where a reply goes, as the outbox keeps it: a mailto: address whose
 * fields thread it (RFC 6068), or a bare address for a new message.
 */
export interface MailTarget { address: string; subject?: string; inReplyTo?: string; references?: string[] }

export function targetOf(to: string): MailTarget | undefined {
  const trimmed = to.trim();
  if (!/^mailto:/i.test(trimmed)) return ADDRESS.test(trimmed) ? { address: addressOf(trimmed) } : undefined;
  const query = trimmed.indexOf('?');
  let address: string;
  try {
    address = decodeURIComponent(trimmed.slice(7, query === -1 ? undefined : query));
  } catch {
    return undefined;
  }
  if (!ADDRESS.test(address)) return undefined;
  const fields = new URLSearchParams(query === -1 ? '' : trimmed.slice(query + 1));
  const references = fields.get('references')?.split(/\s+/).filter(Boolean);
  return {
    address: addressOf(address),
    ...(fields.get('subject') ? { subject: fields.get('subject')! } : {}),
    ...(fields.get('in-reply-to') ? { inReplyTo: fields.get('in-reply-to')! } : {}),
    ...(references?.length ? { references } : {}),
  };
}

export function mailtoOf(target: MailTarget): string {
  const fields = new URLSearchParams();
  if (target.subject) fields.set('subject', target.subject);
  if (target.inReplyTo) fields.set('in-reply-to', target.inReplyTo);
  if (target.references?.length) fields.set('references', target.references.join(' '));
  const query = fields.toString().replace(/\+/g, '%20');
  return `mailto:${target.address}${query ? `?${query}` : ''}`;
}

/** "Re: " once before a subject. */
const replySubject = (subject: string | undefined) => {
  const plain = (subject ?? '').replace(/[\r\n]+/g, ' ').trim().slice(0, 200);
  return /^re:/i.test(plain) ? plain : `Re: ${plain || '(no subject)'}`;
};

/** Message ids in a header (<id@host> each). */
const idsIn = (value: string | undefined) => (value ? value.match(/<[^<>\s]+>/g) ?? [] : []);

/** The address in a header such as Return-Path (<a@b>, or <> for a bounce); undefined when there is none. */
function envelopeAddress(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const inside = /<([^<>]*)>/.exec(value);
  return (inside ? inside[1]! : value).trim().toLowerCase();
}

/** A structured header's value without its comments ("bulk (from the list)" is bulk) and parameters, lower-cased. */
export function headerToken(value: string): string {
  let text = value;
  // Comments nest: removed from the innermost out.
  for (let before = ''; before !== text;) {
    before = text;
    text = text.replace(/\((?:[^()\\]|\\.)*\)/g, ' ');
  }
  return text.split(';')[0]!.trim().toLowerCase();
}

/** Precedence values that mark mail no one should answer automatically. */
const UNANSWERED_PRECEDENCE = new Set(['bulk', 'list', 'junk', 'auto_reply']);

/**
 * Why a message is not to be answered: it says it was sent automatically, it
 * went to a list or in bulk, it is a bounce, or it is the account's own.
 * Every occurrence of a header counts (an "Auto-Submitted: no" before an
 * "Auto-Submitted: auto-replied" does not make a message a person's), and a
 * value is read without its comments.
 */
export function unanswerable(headers: ReadonlyMap<string, readonly string[]>, sender: string, own: string): string | undefined {
  const values = (name: string) => headers.get(name) ?? [];
  const automatic = values('auto-submitted').find((value) => headerToken(value) !== 'no');
  if (automatic !== undefined) return `it is auto-submitted (${automatic.trim().slice(0, 40)})`;
  if (sender === '') return 'it is a bounce (empty envelope sender)';
  if (sender === own) return 'it is the account\'s own';
  if (/^(mailer-daemon|postmaster)@/i.test(sender)) return 'it is from a mail server';
  const precedence = values('precedence').map(headerToken).find((value) => UNANSWERED_PRECEDENCE.has(value));
  if (precedence !== undefined) return precedence === 'auto_reply' ? 'it is an automatic reply (Precedence: auto_reply)' : `it is ${precedence} mail`;
  if (headers.has('list-id') || headers.has('list-unsubscribe')) return 'it came through a mailing list';
  if (headers.has('x-autoreply') || headers.has('x-autorespond')) return 'it is an automatic reply';
  if (values('x-auto-response-suppress').some((value) => /\b(all|autoreply|oof)\b/i.test(value))) return 'it asks not to be answered automatically';
  return undefined;
}

/** A reply's own text, without the quoted message below it ("On ... wrote:" and the lines starting with ">"). */
export function withoutQuote(text: string): string {
  const lines = text.replace(/\r\n?/g, '\n').split('\n');
  let end = lines.length;
  while (end > 0 && (lines[end - 1]!.trim() === '' || lines[end - 1]!.startsWith('>'))) end--;
  if (end < lines.length && end > 0 && /wrote:\s*$/i.test(lines[end - 1]!)) end--;
  // A client that puts the attribution on two lines ("On Mon, ... <a@b>\nwrote:").
  if (end < lines.length && end > 0 && /^On .*/.test(lines[end - 1]!) && /<[^>]+>\s*$/.test(lines[end - 1]!)) end--;
  const kept = lines.slice(0, end).join('\n').trim();
  return kept || text.trim();
}

let converter: Promise<(html: string) => string> | undefined;
/** HTML mail as text (Markdown), the converter loaded at the first HTML mail. */
const textOf = async (html: string) => (await (converter ??= import('turndown').then(({ default: Turndown }) => {
  const service = new Turndown({ headingStyle: 'atx', codeBlockStyle: 'fenced' });
  service.remove(['script', 'style', 'head', 'title']);
  return (markup: string) => service.turndown(markup);
})))(html);

/** Where a raw message was found, and whose mailbox it is in. */
export interface MailFound {
  /** The channel and account reading it. */
  channelId: string;
  account: string;
  /** The account's own address. */
  own: string;
  uid: number;
  uidValidity?: bigint;
  /** The message's size when only its headers were read (it is larger than maxMessageBytes). */
  oversize?: number;
  log: Logger;
}

/** A raw message as an inbound one, or undefined (the reason logged) when it is not to be answered. */
export async function readMail(raw: Buffer, found: MailFound): Promise<InboundMessage | undefined> {
  const { uid, uidValidity, oversize, log } = found;
  const { default: PostalMime } = await import('postal-mime');
  const parsed = await PostalMime.parse(oversize === undefined ? raw : Buffer.concat([raw, Buffer.from('\r\n')]), { attachmentEncoding: 'arraybuffer', maxNestingDepth: 64, maxRfc822NestingDepth: 5 });
  // Every value of each header, in order: the loop guard reads them all; the rest read the first.
  const every = new Map<string, string[]>();
  for (const header of parsed.headers) {
    const values = every.get(header.key);
    if (values) values.push(header.value);
    else every.set(header.key, [header.value]);
  }
  const headers = new Map([...every].map(([key, values]) => [key, values[0]!]));
  const own = addressOf(found.own);
  const from = parsed.from?.address ? addressOf(parsed.from.address) : undefined;
  // The envelope sender, as the delivering server recorded it; the From only when there is none.
  const envelope = envelopeAddress(headers.get('return-path'));
  const sender = envelope ?? from ?? '';
  const skip = unanswerable(every, sender, own) ?? (from === own ? 'it is the account\'s own' : undefined);
  if (skip) {
    log.info({ uid, sender: sender || undefined }, `email: not answered: ${skip}`);
    return undefined;
  }
  if (!ADDRESS.test(sender)) {
    log.info({ uid }, 'email: not answered: no sender address');
    return undefined;
  }
  if (from && envelope && from !== envelope) log.info({ uid, sender, from }, 'email: the From differs from the envelope sender; the envelope sender is taken');
  const messageId = idsIn(parsed.messageId)[0] ?? idsIn(headers.get('message-id'))[0];
  const references = idsIn(headers.get('references'));
  const inReplyTo = idsIn(headers.get('in-reply-to'))[0];
  const root = references[0] ?? inReplyTo ?? messageId ?? `<uid-${uidValidity ?? 0}-${uid}@${own.split('@')[1]}>`;
  const thread = createHash('sha256').update(root).digest('hex').slice(0, 12);
  const chain = [...(references.length ? references : inReplyTo ? [inReplyTo] : []), ...(messageId ? [messageId] : [])];
  const replyTo = mailtoOf({
    address: sender, subject: replySubject(parsed.subject),
    ...(messageId ? { inReplyTo: messageId } : {}),
    ...(chain.length ? { references: chain.length > MAX_REFERENCES ? [chain[0]!, ...chain.slice(-(MAX_REFERENCES - 1))] : chain } : {}),
  });
  let body = parsed.text?.trim() ? parsed.text : parsed.html ? await textOf(parsed.html) : '';
  body = withoutQuote(body ?? '');
  if (oversize !== undefined) {
    const size = oversize >= 1024 * 1024 ? `${(oversize / 1024 / 1024).toFixed(1)} MB` : `${Math.ceil(oversize / 1024)} KB`;
    body = `[This message is ${size}, more than the gateway reads (channels.${found.channelId}.maxMessageBytes); only its headers were read.]`;
  }
  // A new thread's subject often says what is asked.
  const subject = parsed.subject?.trim();
  const text = (!inReplyTo && !references.length && subject ? `Subject: ${subject}\n\n${body}` : body).slice(0, MAX_INBOUND_CHARS);
  const attachments: InboundAttachment[] = (parsed.attachments ?? []).map((attachment, index) => {
    const bytes = new Uint8Array(attachment.content as ArrayBuffer);
    return {
      name: attachment.filename || `attachment-${index + 1}`,
      mimeType: attachment.mimeType || undefined,
      size: bytes.byteLength,
      fetch: async (maxBytes: number) => {
        if (bytes.byteLength > maxBytes) throw new Error(`${bytes.byteLength} bytes, more than ${maxBytes}`);
        return bytes;
      },
    };
  });
  return {
    account: found.account, kind: 'direct', sender, senderName: parsed.from?.name ? `${parsed.from.name} <${sender}>` : sender,
    replyTo, thread, text, at: Date.now(), platformId: messageId ?? `uid:${uidValidity ?? 0}:${uid}`,
    ...(attachments.length ? { attachments } : {}),
  };
}
