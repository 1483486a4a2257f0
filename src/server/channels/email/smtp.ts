/**
 * Sending mail over SMTP (nodemailer, loaded at the first reply): replies
 * share a few kept connections, log in only over TLS unless allowed
 * otherwise, thread (In-Reply-To, References, "Re:"), quote nothing and carry
 * Auto-Submitted, so that other programs do not answer them.
 */
import { createHash, randomUUID } from 'node:crypto';
import { ChannelSendError, type OutboundFile, type SendReceipt } from '../../kernel/channel.ts';
import { targetOf } from './mail.ts';

type Transport = import('nodemailer').Transporter;
type SmtpOptions = import('nodemailer/lib/smtp-pool').Options;

/** Who a mail is from: the account's address, and the name shown with it. */
export interface Sender { address: string; fromName?: string }

export class MailSender {
  /** How to reach the SMTP server; the (pooled) transport is made at the first send. */
  private options?: SmtpOptions;
  private transport?: Transport;

  /** Whether the account has said how to reach its SMTP server. */
  get configured(): boolean {
    return this.options !== undefined;
  }

  /** How to reach the SMTP server from now on (the connections kept for the former settings are closed). */
  configure(server: { host: string; port: number; secure: boolean }, auth: { user: string; pass: string }, strict: boolean): void {
    this.close();
    // Replies share a few kept connections (a new one per mail costs a TLS handshake and a login).
    this.options = {
      pool: true, maxConnections: 2, maxMessages: 100, host: server.host, port: server.port, secure: server.secure, requireTLS: strict && !server.secure, auth,
      connectionTimeout: 15_000, greetingTimeout: 15_000, socketTimeout: 60_000,
    };
  }

  /**
   * Sends one mail to `to` (an address, or a mailto: whose fields thread it);
   * its Message-ID follows from the idempotency key, so a retry is known as
   * the same mail. A 5xx answer (other than a refused login) is for good.
   */
  async send(from: Sender, key: string | undefined, to: string, text: string, file?: OutboundFile): Promise<SendReceipt> {
    const transport = this.transport ??= (await import('nodemailer')).createTransport(this.options!);
    const target = targetOf(to);
    if (!target) throw new ChannelSendError(`not an address: ${to.slice(0, 100)}`, { permanent: true });
    const domain = from.address.split('@')[1]!;
    const messageId = `<${key ? createHash('sha256').update(key).digest('hex').slice(0, 32) : randomUUID()}@${domain}>`;
    try {
      await transport.sendMail({
        from: from.fromName ? { name: from.fromName, address: from.address } : from.address,
        to: target.address,
        subject: target.subject ?? `Message from ${from.fromName ?? from.address}`,
        text,
        messageId,
        ...(file ? { attachments: [{ filename: file.name, content: Buffer.from(file.data), contentType: file.mimeType }] } : {}),
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

  close(): void {
    this.transport?.close();
    this.transport = undefined;
  }
}
