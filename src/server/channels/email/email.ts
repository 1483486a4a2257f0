/**
 * Email: one mailbox per account, read over IMAP (imap.ts) and answered over
 * SMTP (smtp.ts). Each sender address is a peer and each thread a session of
 * its own. What a mail says, who it is from and whether it may be answered at
 * all is read in mail.ts.
 *
 * Here: the accounts of the settings, each account's connection (its servers,
 * its password, TLS required), and the channel.
 */
import { isLoopbackAddress } from '../../../shared/config/exposure.ts';
import { ChannelSendError, type Channel, type ChannelContext, type ChannelSettings, type OutboundFile, type SendOptions, type SendReceipt } from '../../kernel/channel.ts';
import { AccountChannel, AccountConnection } from '../account-channel.ts';
import { accountsOf, settingPath } from '../accounts.ts';
import { Mailbox } from './imap.ts';
import { ADDRESS, addressOf, targetOf } from './mail.ts';
import { MailSender } from './smtp.ts';

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
  private stopped = false;
  private readonly mailbox: Mailbox;
  private readonly sender = new MailSender();

  constructor(channelId: string, name: string, settings: () => EmailAccountSettings | undefined, context: ChannelContext, ImapFlow: typeof import('imapflow').ImapFlow) {
    super(channelId, name, settings, context);
    this.mailbox = new Mailbox({
      channelId, name,
      log: () => this.log,
      settings: () => this.settings(),
      inbound: (message) => this.context.inbound(message),
      dropped: () => {
        this.setState('connecting', 'the IMAP connection closed; reconnecting');
        this.later();
      },
      longestWait: () => this.reconnect.longest,
    }, ImapFlow);
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
    this.sender.configure(smtp, auth, strict);
    await this.mailbox.open(imap, auth, strict, settings.mailbox);
    this.reconnect.succeeded();
    this.setState('connected', `${settings.address} (${settings.mailbox})`);
    this.mailbox.drain();
  }

  /** A mail; with a file, the file attached and the text its body. */
  async send(to: string, text: string, { idempotencyKey }: SendOptions = {}, file?: OutboundFile): Promise<SendReceipt> {
    const settings = this.settings();
    if (!settings?.address || !this.sender.configured) throw new ChannelSendError(`${this.channelId} account ${this.name} is ${this.status.state}; the message was not sent`);
    const key = idempotencyKey ? `${this.channelId}\n${this.name}\n${idempotencyKey}` : undefined;
    return this.sender.send({ address: settings.address, fromName: settings.fromName }, key, to, text || file?.name || '', file);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.reconnect.stop();
    await this.mailbox.close();
    this.sender.close();
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

  /** What mail servers commonly take in one message, attachments encoded. */
  readonly fileLimit = 20 * 1024 * 1024;

  sendFile(account: string, to: string, file: OutboundFile, caption: string, options?: SendOptions): Promise<SendReceipt> {
    return this.running(account).send(to, caption, options, file);
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
