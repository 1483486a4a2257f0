/**
 * Email: one mailbox per account, read over IMAP (imapflow, IDLE) and
 * answered over SMTP (nodemailer). Each sender address is a peer and each
 * thread a session of its own. A message is marked \Seen only once the
 * gateway has stored it; what is left unseen is read again on the next
 * connection. Replies thread (In-Reply-To, References, "Re:"), quote nothing
 * and carry Auto-Submitted; mail that is auto-submitted, bulk, a bounce or
 * the account's own is never answered, so two robots cannot mail each other
 * forever.
 *
 * Who a message is from is its envelope sender, as the receiving server
 * recorded it (Return-Path): a From header that says otherwise is shown, never
 * believed. The gateway checks no DKIM signature; a server that checks them
 * (and SPF) and refuses what fails is what makes the envelope sender worth
 * trusting.
 */
import { createHash, randomUUID } from 'node:crypto';
import { isLoopbackAddress } from '../../../shared/config/exposure.ts';
import { ChannelSendError, type Channel, type ChannelContext, type ChannelSettings, type InboundAttachment, type InboundMessage, type SendOptions, type SendReceipt } from '../../kernel/channel.ts';
import { AccountChannel, AccountConnection } from '../account-channel.ts';
import { accountsOf, settingPath } from '../accounts.ts';
import { Reconnect } from '../reconnect.ts';

/** Longest text taken from one message. */
const MAX_INBOUND_CHARS = 32_768;
/** At most this many ids of a thread go in a reply's References: the first (the thread's root) and the latest. */
const MAX_REFERENCES = 10;

interface EmailAccountSettings {
  enabled: boolean;
  address?: string;
  user?: string;
  imap?: string;
  smtp?: string;
  allowPlaintext: boolean;
  mailbox: string;
  fromName?: string;
  maxMessageBytes: number;
}

/** The accounts of an email channel's settings: the top level (its address) and each of `accounts`. */
export function emailAccounts(settings: ChannelSettings): Map<string, EmailAccountSettings> {
  return accountsOf<EmailAccountSettings>(settings, {
    keys: ['address', 'user', 'imap', 'smtp', 'allowPlaintext', 'mailbox', 'fromName', 'maxMessageBytes'],
    // maxMessageBytes is the channel's alone (an account's entry has no such key).
    inherited: { imap: true, smtp: true, allowPlaintext: true, mailbox: true, fromName: true, maxMessageBytes: true },
    defaults: { allowPlaintext: false, mailbox: 'INBOX', maxMessageBytes: 25 * 1024 * 1024 },
    hasDefault: (top) => Boolean(top.address),
  });
}

const secretFor = (channelId: string, account: string) => settingPath(channelId, account, 'password');

const ADDRESS = /^[^@\s<>]{1,128}@[^@\s<>]{1,255}$/;
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

type ImapClient = import('imapflow').ImapFlow;
type Transport = import('nodemailer').Transporter;
type SmtpOptions = import('nodemailer/lib/smtp-pool').Options;

/** The pieces of a server address: host, port, TLS from the start or not. */
function serverOf(value: string | undefined, kind: 'imap' | 'smtp'): { host: string; port: number; secure: boolean } {
  if (!value) throw new Error(`no ${kind.toUpperCase()} server`);
  const url = new URL(value);
  const secure = url.protocol === `${kind}s:`;
  if (!secure && url.protocol !== `${kind}:`) throw new Error(`the ${kind.toUpperCase()} server must be a ${kind}:// or ${kind}s:// address (got ${url.protocol})`);
  const port = url.port ? Number(url.port) : kind === 'imap' ? (secure ? 993 : 143) : (secure ? 465 : 587);
  return { host: url.hostname.replace(/^\[|\]$/g, ''), port, secure };
}

const local = (host: string) => isLoopbackAddress(host) || host === 'localhost';

class EmailAccount extends AccountConnection<EmailAccountSettings> {
  private client?: ImapClient;
  private transport?: Transport;
  private stopped = false;
  private draining?: Promise<void>;
  private again = false;
  /** A read of the mailbox that stopped (the store refused a message) is tried again with backoff, as a connection is. */
  private readonly redrain = new Reconnect({ maxDelayMs: () => this.reconnect.longest });
  private readonly ImapFlow: typeof import('imapflow').ImapFlow;
  /** How to reach the SMTP server; the (pooled) transport is made at the first send. */
  private smtp?: SmtpOptions;

  constructor(channelId: string, name: string, settings: () => EmailAccountSettings | undefined, context: ChannelContext, ImapFlow: typeof import('imapflow').ImapFlow) {
    super(channelId, name, settings, context);
    this.ImapFlow = ImapFlow;
  }

  start(): void {
    this.connect().catch((error: unknown) => this.failed(error));
  }

  /** A connection that failed: the reason shown, another try after a while (a setting that is wrong waits for a fix). */
  private failed(error: unknown): void {
    if (this.stopped) return;
    const message = (error as { responseText?: string; message?: string })?.responseText ?? (error as Error)?.message ?? String(error);
    this.setState('error', message);
    this.log.warn({ error: message }, 'email account cannot connect');
    this.later();
  }

  private later(): void {
    if (this.stopped || this.reconnect.pending) return;
    this.reconnect.schedule(() => this.start());
  }

  private async connect(): Promise<void> {
    const settings = this.settings();
    if (!settings?.address || !ADDRESS.test(settings.address)) throw new Error(`set the mailbox's address: gateway config set ${settingPath(this.channelId, this.name, 'address')} bot@example.org`);
    const imap = serverOf(settings.imap, 'imap');
    const smtp = serverOf(settings.smtp, 'smtp');
    if (settings.allowPlaintext && !(local(imap.host) && local(smtp.host))) {
      throw new Error('allowPlaintext is refused for a server that is not on this host: passwords would cross the network in the clear');
    }
    const password = await this.context.secret(secretFor(this.channelId, this.name));
    if (!password) throw new Error(`no password: printf %s "$PASSWORD" | gateway secrets set ${secretFor(this.channelId, this.name)}`);
    const auth = { user: settings.user ?? settings.address, pass: password };
    // An account in error stays so (with its reason) while it tries again.
    if (this.status.state !== 'error') this.setState('connecting');
    // Logins only over TLS: from the start (imaps://, smtps://) or after STARTTLS, which is then required.
    const strict = !settings.allowPlaintext;
    this.transport?.close();
    this.transport = undefined;
    // Replies share a few kept connections (a new one per mail costs a TLS handshake and a login).
    this.smtp = {
      pool: true, maxConnections: 2, maxMessages: 100, host: smtp.host, port: smtp.port, secure: smtp.secure, requireTLS: strict && !smtp.secure, auth,
      connectionTimeout: 15_000, greetingTimeout: 15_000, socketTimeout: 60_000,
    };
    const client = new this.ImapFlow({
      host: imap.host, port: imap.port, secure: imap.secure, auth, logger: false, emitLogs: false,
      ...(imap.secure ? {} : { doSTARTTLS: strict ? true : undefined }),
      connectionTimeout: 15_000, greetingTimeout: 15_000,
      // IDLE a second after the last command (not imapflow's 15 s: mail arriving meanwhile would wait), renewed every
      // few minutes as servers expect.
      autoIdleDelay: 1000, maxIdleTime: 4 * 60_000,
    });
    this.client = client;
    client.on('error', (error: Error) => {
      if (!this.stopped) this.log.warn({ error: error.message }, 'imap error');
    });
    client.on('close', () => {
      if (this.stopped || this.client !== client) return;
      this.client = undefined;
      this.setState('connecting', 'the IMAP connection closed; reconnecting');
      this.later();
    });
    client.on('exists', () => this.drain());
    try {
      await client.connect();
      await client.mailboxOpen(settings.mailbox);
    } catch (error) {
      // This client is done with: its closing is not a dropped connection to come back from.
      this.client = undefined;
      client.close();
      if ((error as { tlsFailed?: boolean }).tlsFailed && !imap.secure) {
        throw new Error(`the IMAP server offered no STARTTLS: no password was sent (a server on this host may be allowed with allowPlaintext): ${(error as Error).message}`);
      }
      throw error;
    }
    this.reconnect.succeeded();
    this.setState('connected', `${settings.address} (${settings.mailbox})`);
    this.drain();
  }

  /** Reads what is unseen, in order; a new arrival meanwhile makes it look again once it is done. */
  private drain(): void {
    if (this.draining) {
      this.again = true;
      return;
    }
    this.draining = (async () => {
      do {
        this.again = false;
        const client = this.client;
        if (!client || this.stopped) return;
        const found = await client.search({ seen: false }, { uid: true });
        for (const uid of (found || []).sort((a, b) => a - b)) {
          if (this.stopped || this.client !== client) return;
          await this.take(client, uid);
        }
      } while (this.again);
      this.redrain.succeeded();
    })().catch((error: unknown) => {
      if (this.stopped) return;
      // What is left unseen is read again: after a while, or sooner on the next arrival or connection.
      const wait = this.redrain.next();
      this.log.warn({ error: (error as Error)?.message, retryInMs: wait }, 'email: reading the mailbox stopped; it is read again');
      this.redrain.schedule(() => this.drain(), wait);
    }).finally(() => {
      this.draining = undefined;
    });
  }

  /** One message: stored (or left aside, with the reason logged), then marked seen. */
  private async take(client: ImapClient, uid: number): Promise<void> {
    const settings = this.settings();
    if (!settings) return;
    const meta = await client.fetchOne(String(uid), { uid: true, size: true }, { uid: true });
    if (!meta) return;
    const whole = (meta.size ?? 0) <= settings.maxMessageBytes;
    const fetched = await client.fetchOne(String(uid), whole ? { source: true } : { headers: true }, { uid: true });
    if (!fetched) return;
    const raw = whole ? fetched.source : fetched.headers;
    let message: InboundMessage | undefined;
    try {
      message = await this.read(raw ?? Buffer.alloc(0), settings, whole ? undefined : meta.size ?? 0, uid, client.mailbox ? (client.mailbox as { uidValidity?: bigint }).uidValidity : undefined);
    } catch (error) {
      // Mail no parser can read: left aside (seen, so it is not read again and again), and said.
      this.log.warn({ uid, error: (error as Error)?.message }, 'email: a message could not be read; marked seen and left in the mailbox');
    }
    if (message) await this.context.inbound(message);
    await client.messageFlagsAdd(String(uid), ['\\Seen'], { uid: true });
  }

  private async read(raw: Buffer, settings: EmailAccountSettings, oversize: number | undefined, uid: number, uidValidity: bigint | undefined): Promise<InboundMessage | undefined> {
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
    const own = addressOf(settings.address!);
    const from = parsed.from?.address ? addressOf(parsed.from.address) : undefined;
    // The envelope sender, as the delivering server recorded it; the From only when there is none.
    const envelope = envelopeAddress(headers.get('return-path'));
    const sender = envelope ?? from ?? '';
    const skip = unanswerable(every, sender, own) ?? (from === own ? 'it is the account\'s own' : undefined);
    if (skip) {
      this.log.info({ uid, sender: sender || undefined }, `email: not answered: ${skip}`);
      return undefined;
    }
    if (!ADDRESS.test(sender)) {
      this.log.info({ uid }, 'email: not answered: no sender address');
      return undefined;
    }
    if (from && envelope && from !== envelope) this.log.info({ uid, sender, from }, 'email: the From differs from the envelope sender; the envelope sender is taken');
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
      body = `[This message is ${size}, more than the gateway reads (channels.${this.channelId}.maxMessageBytes); only its headers were read.]`;
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
      account: this.name, kind: 'direct', sender, senderName: parsed.from?.name ? `${parsed.from.name} <${sender}>` : sender,
      replyTo, thread, text, at: Date.now(), platformId: messageId ?? `uid:${uidValidity ?? 0}:${uid}`,
      ...(attachments.length ? { attachments } : {}),
    };
  }

  async send(to: string, text: string, { idempotencyKey }: SendOptions = {}): Promise<SendReceipt> {
    const settings = this.settings();
    if (!settings?.address || !this.smtp) throw new ChannelSendError(`${this.channelId} account ${this.name} is ${this.status.state}; the message was not sent`);
    const transport = this.transport ??= (await import('nodemailer')).createTransport(this.smtp);
    const target = targetOf(to);
    if (!target) throw new ChannelSendError(`not an address: ${to.slice(0, 100)}`, { permanent: true });
    const domain = settings.address.split('@')[1]!;
    const messageId = `<${idempotencyKey ? createHash('sha256').update(`${this.channelId}\n${this.name}\n${idempotencyKey}`).digest('hex').slice(0, 32) : randomUUID()}@${domain}>`;
    try {
      await transport.sendMail({
        from: settings.fromName ? { name: settings.fromName, address: settings.address } : settings.address,
        to: target.address,
        subject: target.subject ?? `Message from ${settings.fromName ?? settings.address}`,
        text,
        messageId,
        ...(target.inReplyTo ? { inReplyTo: target.inReplyTo } : {}),
        ...(target.references ? { references: target.references } : {}),
        // RFC 3834: a reply a program wrote; other programs do not answer it.
        headers: { 'Auto-Submitted': target.inReplyTo ? 'auto-replied' : 'auto-generated' },
      });
    } catch (error) {
      const failure = error as { responseCode?: number; code?: string; message?: string };
      const permanent = typeof failure.responseCode === 'number' && failure.responseCode >= 500 && failure.responseCode < 600 && failure.code !== 'EAUTH';
      throw new ChannelSendError(`the SMTP server refused the message: ${failure.message ?? String(error)}`, { permanent });
    }
    return { ids: [messageId] };
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.reconnect.stop();
    this.redrain.stop();
    const client = this.client;
    this.client = undefined;
    await client?.logout().catch(() => client.close());
    this.transport?.close();
    this.setState('disconnected');
  }
}

export class EmailChannel extends AccountChannel<EmailAccount, EmailAccountSettings> implements Channel {
  private ImapFlow?: typeof import('imapflow').ImapFlow;

  protected accountsOf(settings: ChannelSettings): Map<string, EmailAccountSettings> {
    return emailAccounts(settings);
  }

  protected open(name: string, settings: () => EmailAccountSettings | undefined): EmailAccount {
    const account = new EmailAccount(this.id, name, settings, this.context, this.ImapFlow!);
    account.start();
    return account;
  }

  override async start(): Promise<void> {
    // The IMAP client now; SMTP at the first reply, the MIME parser at the first mail, HTML to text at the first HTML mail.
    ({ ImapFlow: this.ImapFlow } = await import('imapflow'));
    await super.start();
  }

  normalizePeer(peer: string): string {
    return targetOf(peer)?.address ?? addressOf(peer);
  }

  isRoom(): boolean {
    return false;
  }

  checkPeer(peer: string): string | undefined {
    return targetOf(peer) ? undefined : 'is not an email address (name@example.org)';
  }
}
