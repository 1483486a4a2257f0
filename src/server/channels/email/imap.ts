/**
 * Reading a mailbox over IMAP (imapflow, with IDLE: new mail is seen as it
 * arrives). A message is marked \Seen only once the gateway has stored it;
 * what is left unseen is read again on the next connection, or after a while
 * when the store refused it.
 */
import type { Logger } from 'pino';
import type { InboundMessage } from '../../kernel/channel.ts';
import { Reconnect } from '../reconnect.ts';
import { readMail } from './mail.ts';

type ImapFlow = typeof import('imapflow').ImapFlow;
type ImapClient = import('imapflow').ImapFlow;

/** What a mailbox needs of its account. */
export interface MailboxOwner {
  readonly channelId: string;
  readonly name: string;
  log(): Logger;
  /** The account's address and the largest message read whole, as the settings say now; undefined once the account is gone from them. */
  settings(): { address?: string; maxMessageBytes: number } | undefined;
  inbound(message: InboundMessage): Promise<void>;
  /** The connection closed by itself: the account connects again. */
  dropped(): void;
  /** The longest wait before reading again (the channel's reconnectMaxDelayMs). */
  longestWait(): number;
}

export class Mailbox {
  private client?: ImapClient;
  private stopped = false;
  private draining?: Promise<void>;
  private again = false;
  /** A read of the mailbox that stopped (the store refused a message) is tried again with backoff, as a connection is. */
  private readonly redrain: Reconnect;
  private readonly owner: MailboxOwner;
  private readonly ImapFlow: ImapFlow;

  constructor(owner: MailboxOwner, ImapFlow: ImapFlow) {
    this.owner = owner;
    this.ImapFlow = ImapFlow;
    this.redrain = new Reconnect({ maxDelayMs: () => owner.longestWait() });
  }

  private get log(): Logger {
    return this.owner.log();
  }

  /**
   * Connects and opens the mailbox: logins only over TLS (imaps://, or
   * STARTTLS, then required) unless `strict` is off. Rejects when it cannot;
   * a connection that closes later is told to the account.
   */
  async open(server: { host: string; port: number; secure: boolean }, auth: { user: string; pass: string }, strict: boolean, mailbox: string): Promise<void> {
    const client = new this.ImapFlow({
      host: server.host, port: server.port, secure: server.secure, auth, logger: false, emitLogs: false,
      ...(server.secure ? {} : { doSTARTTLS: strict ? true : undefined }),
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
      this.owner.dropped();
    });
    client.on('exists', () => this.drain());
    try {
      await client.connect();
      await client.mailboxOpen(mailbox);
    } catch (error) {
      // This client is done with: its closing is not a dropped connection to come back from.
      this.client = undefined;
      client.close();
      if ((error as { tlsFailed?: boolean }).tlsFailed && !server.secure) {
        throw new Error(`the IMAP server offered no STARTTLS: no password was sent (a server on this host may be allowed with allowPlaintext): ${(error as Error).message}`);
      }
      throw error;
    }
  }

  /** Reads what is unseen, in order; a new arrival meanwhile makes it look again once it is done. */
  drain(): void {
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
    const settings = this.owner.settings();
    if (!settings) return;
    const meta = await client.fetchOne(String(uid), { uid: true, size: true }, { uid: true });
    if (!meta) return;
    const whole = (meta.size ?? 0) <= settings.maxMessageBytes;
    const fetched = await client.fetchOne(String(uid), whole ? { source: true } : { headers: true }, { uid: true });
    if (!fetched) return;
    const raw = whole ? fetched.source : fetched.headers;
    let message: InboundMessage | undefined;
    try {
      message = await readMail(raw ?? Buffer.alloc(0), {
        channelId: this.owner.channelId, account: this.owner.name, own: settings.address!, uid, log: this.log,
        ...(whole ? {} : { oversize: meta.size ?? 0 }),
        ...(client.mailbox ? { uidValidity: (client.mailbox as { uidValidity?: bigint }).uidValidity } : {}),
      });
    } catch (error) {
      // Mail no parser can read: left aside (seen, so it is not read again and again), and said.
      this.log.warn({ uid, error: (error as Error)?.message }, 'email: a message could not be read; marked seen and left in the mailbox');
    }
    if (message) await this.owner.inbound(message);
    await client.messageFlagsAdd(String(uid), ['\\Seen'], { uid: true });
  }

  /** Logs out (or closes), and reads no more. */
  async close(): Promise<void> {
    this.stopped = true;
    this.redrain.stop();
    const client = this.client;
    this.client = undefined;
    await client?.logout().catch(() => client.close());
  }
}
