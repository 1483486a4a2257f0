/**
 * A real Prosody (Debian's) for the XMPP tests: its own configuration, data
 * and self-signed certificate in a temporary folder, listening on loopback
 * on a free port, with users registered through prosodyctl. People are real
 * XMPP clients (@xmpp/client) that trust the test certificate.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import { client, xml, type XmppClient, type XmppElement } from '@xmpp/client';
import { freePort, sleep } from './cli.ts';

export const XMPP_DOMAIN = 'gw.test';
export const MUC_DOMAIN = `conference.${XMPP_DOMAIN}`;
export const UPLOAD_DOMAIN = `upload.${XMPP_DOMAIN}`;
/** The largest file the upload service takes (mod_http_file_share's size limit). */
export const UPLOAD_LIMIT = 1024 * 1024;

export class Prosody {
  readonly port: number;
  readonly dir: string;
  readonly certificate: string;
  /** With upload: the HTTPS port of its HTTP upload service (XEP-0363, mod_http_file_share). */
  httpsPort?: number;
  private process?: ChildProcess;
  output = '';

  private constructor(port: number, dir: string) {
    this.port = port;
    this.dir = dir;
    this.certificate = join(dir, `${XMPP_DOMAIN}.crt`);
  }

  /**
   * With plaintext, the server lets clients in without TLS (to test that the gateway refuses it); with upload, it offers
   * HTTP upload (XEP-0363) through mod_http_file_share on upload.<domain>, over HTTPS on loopback.
   */
  static async start(options: { plaintext?: boolean; upload?: boolean } = {}): Promise<Prosody> {
    const dir = mkdtempSync(join(tmpdir(), 'gateway-prosody-'));
    chmodSync(dir, 0o755);
    const server = new Prosody(await freePort(), dir);
    const made = spawnSync('openssl', [
      'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', `/CN=${XMPP_DOMAIN}`,
      '-addext', `subjectAltName=DNS:${XMPP_DOMAIN},DNS:${MUC_DOMAIN},DNS:${UPLOAD_DOMAIN},IP:127.0.0.1`, '-keyout', join(dir, `${XMPP_DOMAIN}.key`), '-out', server.certificate,
    ], { encoding: 'utf8' });
    if (made.status !== 0) throw new Error(`openssl failed: ${made.stderr}`);
    chmodSync(join(dir, `${XMPP_DOMAIN}.key`), 0o644);
    mkdirSync(join(dir, 'data'));
    if (options.upload) server.httpsPort = await freePort();
    const key = join(dir, `${XMPP_DOMAIN}.key`);
    // Files are served at https://127.0.0.1:<port>/file_share/...: the host the certificate names by its address.
    const upload = !options.upload ? [] : [
      `https_ports = { ${server.httpsPort} }`, 'http_ports = { }', 'https_interfaces = { "127.0.0.1" }', 'http_interfaces = { "127.0.0.1" }',
      `https_ssl = { key = "${key}"; certificate = "${server.certificate}" }`, `http_external_url = "https://127.0.0.1:${server.httpsPort}/"`,
    ];
    writeFileSync(server.config, [
      'run_as_root = true',
      `pidfile = "${join(dir, 'prosody.pid')}"`,
      `data_path = "${join(dir, 'data')}"`,
      'log = { { levels = { min = "info" }, to = "console" } }',
      `c2s_ports = { ${server.port} }`, 'c2s_direct_tls_ports = { }', 'legacy_ssl_ports = { }', 's2s_ports = { }', 'interfaces = { "127.0.0.1" }',
      `modules_enabled = { "roster"; "saslauth"; ${options.plaintext ? '' : '"tls"; '}"disco"; "ping"; "smacks"; "posix" }`,
      'modules_disabled = { "s2s" }',
      'authentication = "internal_hashed"',
      `c2s_require_encryption = ${options.plaintext ? 'false' : 'true'}`,
      options.plaintext ? 'allow_unencrypted_plain_auth = true' : '',
      'smacks_hibernation_time = 600',
      `certificates = "${dir}"`,
      ...upload,
      `VirtualHost "${XMPP_DOMAIN}"`,
      `  ssl = { key = "${join(dir, `${XMPP_DOMAIN}.key`)}"; certificate = "${server.certificate}" }`,
      `Component "${MUC_DOMAIN}" "muc"`,
      '  restrict_room_creation = false',
      '  muc_room_locking = false',
      ...(options.upload ? [`Component "${UPLOAD_DOMAIN}" "http_file_share"`, '  http_host = "127.0.0.1"', `  http_file_share_size_limit = ${UPLOAD_LIMIT}`] : []),
    ].join('\n'));
    await server.resume();
    return server;
  }

  private get config(): string {
    return join(this.dir, 'prosody.cfg.lua');
  }

  register(user: string, password: string): void {
    const done = spawnSync('prosodyctl', ['--config', this.config, 'register', user, XMPP_DOMAIN, password], { encoding: 'utf8' });
    if (done.status !== 0) throw new Error(`prosodyctl register ${user} failed: ${done.stdout}${done.stderr}`);
  }

  /** Starts the server (again) and waits for its port. */
  async resume(): Promise<void> {
    this.process = spawn('prosody', ['--config', this.config, '-F'], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.process.stdout!.on('data', (chunk) => { this.output += chunk; });
    this.process.stderr!.on('data', (chunk) => { this.output += chunk; });
    const deadline = Date.now() + 15_000;
    for (;;) {
      const open = await new Promise<boolean>((resolve) => {
        const socket = connect(this.port, '127.0.0.1', () => { socket.destroy(); resolve(true); });
        socket.on('error', () => resolve(false));
      });
      if (open) return;
      if (Date.now() > deadline || this.process.exitCode !== null) throw new Error(`prosody did not start: ${this.output.slice(-2000)}`);
      await sleep(100);
    }
  }

  /** Stops the server (every client's stream drops); SIGKILL drops them mid-stream, without a closing tag. */
  async halt(signal: 'SIGTERM' | 'SIGKILL' = 'SIGTERM'): Promise<void> {
    const running = this.process;
    if (!running || running.exitCode !== null) return;
    running.kill(signal);
    await new Promise((resolve) => running.once('exit', resolve));
  }

  async stop(): Promise<void> {
    await this.halt();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Makes the test process trust a test server's certificate (Node's own TLS, which @xmpp/client uses). */
export function trust(certificate: string): void {
  tls.setDefaultCACertificates([...tls.getCACertificates('default'), readFileSync(certificate, 'utf8')]);
}

export interface Received { from: string; type: string; text: string; element: XmppElement; at: number }

/** A person on the server: a real XMPP client that keeps what it receives. */
export class XmppUser {
  readonly received: Received[] = [];
  readonly jid: string;
  readonly client: XmppClient;
  private constructor(person: XmppClient, jid: string) {
    this.client = person;
    this.jid = jid;
  }

  static async connect(server: Prosody, user: string, password: string): Promise<XmppUser> {
    // A resource of its own: two clients of one account must not take each other's place (Prosody keeps the newer).
    const person = client({ service: `xmpp://127.0.0.1:${server.port}`, domain: XMPP_DOMAIN, username: user, password, resource: `test-${Math.random().toString(36).slice(2, 10)}` });
    const made = new XmppUser(person, `${user}@${XMPP_DOMAIN}`);
    person.on('error', () => undefined);
    person.on('stanza', (stanza) => {
      if (!stanza.is('message')) return;
      const text = stanza.getChildText('body');
      if (text === null) return;
      made.received.push({ from: stanza.attrs.from ?? '', type: stanza.attrs.type ?? 'normal', text, element: stanza, at: Date.now() });
    });
    await person.start();
    // As the gateway does: nothing before stream management is enabled (see channels/xmpp/xmpp.ts).
    for (let waited = 0; !person.streamManagement?.enabled && waited < 3000; waited += 20) await sleep(20);
    await person.send(xml('presence'));
    return made;
  }

  say(to: string, text: string, type: 'chat' | 'groupchat' = 'chat'): Promise<void> {
    return this.client.send(xml('message', { to, type, id: `m${Math.random().toString(36).slice(2)}` }, xml('body', {}, text)));
  }

  async join(room: string, nick: string): Promise<void> {
    await this.client.send(xml('presence', { to: `${room}/${nick}` }, xml('x', { xmlns: 'http://jabber.org/protocol/muc' })));
    await sleep(300);
  }

  async waitFor(pattern: RegExp, options: { after?: number; timeoutMs?: number; from?: string } = {}): Promise<Received> {
    const deadline = Date.now() + (options.timeoutMs ?? 15_000);
    for (;;) {
      const found = this.received.slice(options.after ?? 0).find((message) => pattern.test(message.text) && (!options.from || message.from.startsWith(options.from)));
      if (found) return found;
      if (Date.now() > deadline) throw new Error(`no message matching ${pattern} within the time (got ${JSON.stringify(this.received.map((m) => m.text))})`);
      await sleep(50);
    }
  }

  async quit(): Promise<void> {
    await this.client.stop().catch(() => undefined);
  }
}
