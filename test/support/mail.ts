/**
 * A real mail system for the tests: Debian's postfix (SMTP, with SASL logins
 * through dovecot and STARTTLS) and dovecot (IMAP with IDLE and STARTTLS),
 * each an instance of its own with its configuration, certificate, queue and
 * mailboxes in a temporary folder, listening on loopback ports. Mail to
 * anyone at example.test is delivered by postfix into that user's Maildir,
 * which dovecot serves. People are read and written with the protocol's
 * common clients (nodemailer, imapflow).
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, sleep, waitFor } from './cli.ts';

export const MAIL_DOMAIN = 'example.test';
/** The mailboxes' owner: postfix delivers and dovecot serves as this user. */
const MAIL_UID = 65534;
const MAIL_GID = 65534;

export function mailServersAvailable(): string | undefined {
  for (const command of ['/usr/sbin/postfix', '/usr/sbin/dovecot', 'openssl']) {
    if (spawnSync(command, ['-h'], { stdio: 'ignore' }).error) return `${command} is not installed`;
  }
  return undefined;
}

export class MailServers {
  readonly dir: string;
  readonly smtpPort: number;
  readonly imapPort: number;
  readonly certificate: string;
  private dovecot?: ChildProcess;
  private postfixProcess?: ChildProcess;
  private readonly users = new Map<string, string>();

  private constructor(dir: string, smtpPort: number, imapPort: number) {
    this.dir = dir;
    this.smtpPort = smtpPort;
    this.imapPort = imapPort;
    this.certificate = join(dir, 'cert.pem');
  }

  static async start(): Promise<MailServers> {
    const dir = mkdtempSync(join(tmpdir(), 'mail-'));
    // postfix's and dovecot's own users walk into it.
    chmodSync(dir, 0o755);
    const servers = new MailServers(dir, await freePort(), await freePort());
    servers.configure();
    try {
      await servers.startPostfix();
      await servers.startDovecot();
    } catch (error) {
      // Nothing left running behind a start that failed half way.
      await servers.stop().catch(() => undefined);
      throw error;
    }
    return servers;
  }

  private configure(): void {
    const { dir } = this;
    const made = spawnSync('openssl', [
      'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', `/CN=mail.${MAIL_DOMAIN}`,
      '-addext', `subjectAltName=DNS:mail.${MAIL_DOMAIN},DNS:localhost,IP:127.0.0.1`, '-keyout', join(dir, 'key.pem'), '-out', this.certificate,
    ], { encoding: 'utf8' });
    if (made.status !== 0) throw new Error(`openssl failed: ${made.stderr}`);
    chmodSync(join(dir, 'key.pem'), 0o644);
    for (const sub of ['mail', 'postfix', 'queue', 'data', 'dovecot']) mkdirSync(join(dir, sub));
    chownSync(join(dir, 'mail'), MAIL_UID, MAIL_GID);
    // postfix's data directory belongs to its own user, whatever ids the system gave it.
    const id = (flag: string) => Number(spawnSync('id', [flag, 'postfix'], { encoding: 'utf8' }).stdout.trim());
    chownSync(join(dir, 'data'), id('-u'), id('-g'));
    writeFileSync(join(dir, 'users'), '');
    writeFileSync(join(dir, 'vmailbox'), '');
    writeFileSync(join(dir, 'postfix/main.cf'), [
      'compatibility_level = 3.6',
      `queue_directory = ${dir}/queue`,
      `data_directory = ${dir}/data`,
      'command_directory = /usr/sbin',
      'daemon_directory = /usr/lib/postfix/sbin',
      'meta_directory = /etc/postfix',
      'shlib_directory = /usr/lib/postfix',
      'mail_owner = postfix',
      'setgid_group = postdrop',
      `myhostname = mail.${MAIL_DOMAIN}`,
      `mydomain = ${MAIL_DOMAIN}`,
      'mydestination =',
      'inet_interfaces = 127.0.0.1',
      'inet_protocols = ipv4',
      'mynetworks = 127.0.0.0/8',
      'smtputf8_enable = no',
      'alias_maps =',
      'alias_database =',
      'local_recipient_maps =',
      `virtual_mailbox_domains = ${MAIL_DOMAIN}`,
      `virtual_mailbox_base = ${dir}/mail`,
      `virtual_mailbox_maps = texthash:${dir}/vmailbox`,
      // A session open before a person was added (the gateway keeps its connections) takes mail for them too: the
      // delivery agent, restarted by the reload that adds them, knows them.
      'smtpd_reject_unlisted_recipient = no',
      `virtual_uid_maps = static:${MAIL_UID}`,
      `virtual_gid_maps = static:${MAIL_GID}`,
      'virtual_minimum_uid = 100',
      'message_size_limit = 52428800',
      'virtual_mailbox_limit = 0',
      `smtpd_tls_cert_file = ${this.certificate}`,
      `smtpd_tls_key_file = ${dir}/key.pem`,
      'smtpd_tls_security_level = may',
      'smtpd_sasl_auth_enable = yes',
      'smtpd_sasl_type = dovecot',
      'smtpd_sasl_path = private/auth',
      'smtpd_tls_auth_only = yes',
      'smtpd_relay_restrictions = permit_mynetworks, permit_sasl_authenticated, reject_unauth_destination',
      `maillog_file = ${dir}/postfix.log`,
      `maillog_file_prefixes = ${dir}`,
      'biff = no',
      'delay_warning_time = 0',
      '',
    ].join('\n'));
    writeFileSync(join(dir, 'postfix/master.cf'), [
      `127.0.0.1:${this.smtpPort} inet n - n - - smtpd`,
      'pickup unix n - n 60 1 pickup',
      'cleanup unix n - n - 0 cleanup',
      'qmgr unix n - n 300 1 qmgr',
      'rewrite unix - - n - - trivial-rewrite',
      'bounce unix - - n - 0 bounce',
      'defer unix - - n - 0 bounce',
      'trace unix - - n - 0 bounce',
      'verify unix - - n - 1 verify',
      'flush unix n - n 1000? 0 flush',
      'proxymap unix - - n - - proxymap',
      'smtp unix - - n - - smtp',
      'relay unix - - n - - smtp',
      'showq unix n - n - - showq',
      'error unix - - n - - error',
      'retry unix - - n - - error',
      'discard unix - - n - - discard',
      'virtual unix - n n - - virtual',
      'anvil unix - - n - 1 anvil',
      'scache unix - - n - 1 scache',
      'postlog unix-dgram n - n - 1 postlogd',
      'tlsmgr unix - - n 1000? 1 tlsmgr',
      '',
    ].join('\n'));
    writeFileSync(join(dir, 'dovecot.conf'), [
      `base_dir = ${dir}/dovecot`,
      `instance_name = gateway-test-${this.imapPort}`,
      'protocols = imap',
      'listen = 127.0.0.1',
      `log_path = ${dir}/dovecot.log`,
      'ssl = yes',
      `ssl_cert = <${this.certificate}`,
      `ssl_key = <${dir}/key.pem`,
      'auth_mechanisms = plain login',
      'default_login_user = dovenull',
      'default_internal_user = dovecot',
      `first_valid_uid = ${MAIL_UID}`,
      `passdb {\n  driver = passwd-file\n  args = scheme=PLAIN username_format=%u ${dir}/users\n}`,
      `userdb {\n  driver = static\n  args = uid=${MAIL_UID} gid=${MAIL_GID} home=${dir}/mail/%d/%n\n}`,
      `mail_location = maildir:${dir}/mail/%d/%n`,
      `service imap-login {\n  inet_listener imap {\n    address = 127.0.0.1\n    port = ${this.imapPort}\n  }\n  inet_listener imaps {\n    port = 0\n  }\n}`,
      `service auth {\n  unix_listener ${dir}/queue/private/auth {\n    mode = 0666\n  }\n}`,
      'imap_idle_notify_interval = 1 secs',
      '',
    ].join('\n'));
  }

  private postfix(...args: string[]): { status: number | null; output: string } {
    const done = spawnSync('/usr/sbin/postfix', ['-c', join(this.dir, 'postfix'), ...args], { encoding: 'utf8' });
    return { status: done.status, output: `${done.stdout}${done.stderr}` };
  }

  async startPostfix(): Promise<void> {
    // In the foreground (start-fg): a child of the tests. Its output goes nowhere: postfix cannot log to a socket
    // (what a child's piped output is), so it logs to a file, read for a failure's message.
    const child = spawn('/usr/sbin/postfix', ['-c', join(this.dir, 'postfix'), 'start-fg'], { stdio: 'ignore' });
    this.postfixProcess = child;
    try {
      await this.listening(this.smtpPort, 'postfix');
    } catch (error) {
      throw new Error(`${(error as Error).message}: ${this.log('postfix')}`);
    }
  }

  async stopPostfix(): Promise<void> {
    const child = this.postfixProcess;
    this.postfixProcess = undefined;
    this.postfix('stop');
    if (child && child.exitCode === null) await new Promise((resolve) => child.once('exit', resolve));
    await waitFor(async () => (await this.connects(this.smtpPort) ? undefined : true), 10_000, 'postfix to stop');
  }

  async startDovecot(): Promise<void> {
    // A process group of its own: stopped, the whole instance goes, its sessions too (as a service manager stops it).
    this.dovecot = spawn('/usr/sbin/dovecot', ['-F', '-c', join(this.dir, 'dovecot.conf')], { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let output = '';
    this.dovecot.stdout!.on('data', (chunk) => { output += chunk; });
    this.dovecot.stderr!.on('data', (chunk) => { output += chunk; });
    try {
      await this.listening(this.imapPort, 'dovecot');
    } catch (error) {
      throw new Error(`${(error as Error).message}: ${output}\n${this.log('dovecot')}`);
    }
  }

  async stopDovecot(): Promise<void> {
    const child = this.dovecot;
    this.dovecot = undefined;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    process.kill(-child.pid!, 'SIGTERM');
    await exited;
    // Its sessions end when they notice the master is gone; a service manager ends them at once.
    await sleep(100);
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // none left
    }
  }

  /** A mailbox at example.test with its password (for IMAP and SMTP logins). */
  addUser(name: string, password: string): string {
    const address = `${name}@${MAIL_DOMAIN}`;
    this.users.set(address, password);
    writeFileSync(join(this.dir, 'users'), [...this.users].map(([user, secret]) => `${user}:${secret}::::::\n`).join(''));
    writeFileSync(join(this.dir, 'vmailbox'), [...this.users.keys()].map((user) => `${user} ${MAIL_DOMAIN}/${user.split('@')[0]}/\n`).join(''));
    // postfix reads texthash maps when its daemons start: a new user takes a reload.
    this.postfix('reload');
    // Dovecot looks at its passwd-file at most once a second: a login within the second of its last look would not see the
    // new user. Past that second, it does.
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1100);
    return address;
  }

  /** The end of a server's log. */
  log(name: 'postfix' | 'dovecot'): string {
    try {
      return readFileSync(join(this.dir, `${name}.log`), 'utf8').split('\n').slice(-40).join('\n');
    } catch {
      return '';
    }
  }

  private async connects(port: number): Promise<boolean> {
    const net = await import('node:net');
    return new Promise((resolve) => {
      const socket = net.connect(port, '127.0.0.1');
      socket.once('connect', () => { socket.destroy(); resolve(true); });
      socket.once('error', () => resolve(false));
    });
  }

  private async listening(port: number, what: string): Promise<void> {
    await waitFor(async () => ((await this.connects(port)) ? true : undefined), 60_000, `${what} to listen on ${port}`);
    await sleep(100);
  }

  async stop(): Promise<void> {
    await this.stopDovecot();
    await this.stopPostfix().catch(() => undefined);
    rmSync(this.dir, { recursive: true, force: true });
  }
}

interface SendOptions {
  to: string; subject?: string; text?: string; html?: string; headers?: Record<string, string>; inReplyTo?: string; references?: string[];
  from?: string; envelope?: string; raw?: string; attachments?: { filename: string; content: Buffer | string; contentType?: string }[];
}

/** A mail as a person's client shows it. */
export interface ReadMail {
  uid: number;
  from: string;
  to: string;
  subject: string;
  text: string;
  messageId?: string;
  inReplyTo?: string;
  references: string[];
  headers: Map<string, string>;
  seen: boolean;
  /** Files attached, with their bytes. */
  attachments: { filename: string; mimeType: string; data: Buffer }[];
}

/**
 * A person with a mailbox at example.test: sends through postfix as a mail
 * client on the local network does (no login), reads their inbox over IMAP.
 */
export class MailPerson {
  readonly address: string;
  private readonly servers: MailServers;
  private readonly password: string;

  constructor(servers: MailServers, name: string, password = `pw-of-${name}`) {
    this.servers = servers;
    this.password = password;
    this.address = servers.addUser(name, password);
  }

  /** Sends a mail; `envelope` sets the envelope sender apart from the From header (as a forger does). */
  async send(options: SendOptions): Promise<string> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.sendOnce(options);
      } catch (error) {
        const code = (error as { code?: string }).code;
        if (attempt >= 5 || !(code === 'ECONNRESET' || code === 'ECONNREFUSED' || code === 'ESOCKET' || code === 'ECONNECTION')) throw error;
        await sleep(200 * attempt);
      }
    }
  }

  private async sendOnce(options: SendOptions): Promise<string> {
    const { createTransport } = (await import('nodemailer')).default;
    const transport = createTransport({ host: '127.0.0.1', port: this.servers.smtpPort, secure: false, tls: { ca: readFileSync(this.servers.certificate, 'utf8') } });
    // A test that stops postfix just after sending: the connection's goodbye may be cut short, which is no failure of the send.
    transport.on('error', () => undefined);
    try {
      const envelope = { from: options.envelope ?? this.address, to: [options.to] };
      if (options.raw !== undefined) return (await transport.sendMail({ envelope, raw: options.raw })).messageId;
      const sent = await transport.sendMail({
        envelope, from: options.from ?? this.address, to: options.to, subject: options.subject ?? 'Hello', text: options.text, html: options.html,
        headers: options.headers, inReplyTo: options.inReplyTo, references: options.references, attachments: options.attachments,
      });
      return sent.messageId;
    } finally {
      transport.close();
    }
  }

  /** Everything in the inbox, oldest first; a connection cut while dovecot starts or stops, or a command it refuses, is tried again, as a mail client does. */
  async inbox(as = this.address, password = this.password): Promise<ReadMail[]> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.read(as, password);
      } catch (error) {
        const { code, responseStatus } = error as { code?: string; responseStatus?: string };
        // A NO from dovecot while postfix delivers into the same Maildir (a message seen half-way) is read again too.
        if (attempt >= 5 || !(code === 'ECONNRESET' || code === 'ECONNREFUSED' || code === 'EPIPE' || code === 'NoConnection' || responseStatus === 'NO')) throw error;
        await sleep(200 * attempt);
      }
    }
  }

  private async read(as: string, password: string): Promise<ReadMail[]> {
    const { ImapFlow } = await import('imapflow');
    const { default: PostalMime } = await import('postal-mime');
    const client = new ImapFlow({ host: '127.0.0.1', port: this.servers.imapPort, secure: false, doSTARTTLS: true, auth: { user: as, pass: password }, logger: false, tls: { ca: readFileSync(this.servers.certificate, 'utf8') } });
    // A server stopped by a test while this reads: the read fails, nothing else does.
    client.on('error', () => undefined);
    await client.connect();
    try {
      const box = await client.mailboxOpen('INBOX');
      const mails: ReadMail[] = [];
      if (box.exists === 0) return mails;
      for await (const message of client.fetch('1:*', { uid: true, source: true, flags: true })) {
        const parsed = await PostalMime.parse(message.source!);
        const headers = new Map<string, string>();
        for (const header of parsed.headers) if (!headers.has(header.key)) headers.set(header.key, header.value);
        mails.push({
          uid: message.uid, from: parsed.from?.address ?? '', to: parsed.to?.map((to) => to.address).join(', ') ?? '', subject: parsed.subject ?? '', text: (parsed.text ?? '').trim(),
          messageId: parsed.messageId, inReplyTo: parsed.inReplyTo, references: (headers.get('references') ?? '').split(/\s+/).filter(Boolean), headers, seen: message.flags?.has('\\Seen') ?? false,
          attachments: parsed.attachments.map((file) => ({ filename: file.filename ?? '', mimeType: file.mimeType, data: Buffer.from(file.content as ArrayBuffer) })),
        });
      }
      return mails;
    } finally {
      await client.logout().catch(() => undefined);
    }
  }

  /** The first mail after the `after`-th whose text matches. */
  async waitFor(pattern: RegExp, options: { after?: number; timeoutMs?: number } = {}): Promise<ReadMail> {
    return waitFor(async () => (await this.inbox()).slice(options.after ?? 0).find((mail) => pattern.test(mail.text)), options.timeoutMs ?? 20_000, `a mail matching ${pattern} for ${this.address}`);
  }
}
