import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, chmodSync } from 'node:fs';
import { createRequire } from 'node:module';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, sleep, waitFor } from './cli.ts';

const NGIRCD = process.env.NGIRCD ?? '/usr/sbin/ngircd';

const portOpen = (port: number): Promise<boolean> => new Promise((resolve) => {
  const socket = connect({ host: '127.0.0.1', port });
  socket.once('connect', () => { socket.destroy(); resolve(true); });
  socket.once('error', () => resolve(false));
});

/** A real ngircd on a free loopback port, with a generated config; stop and start it again on the same port. */
export class IrcServer {
  readonly port: number;
  private readonly dir: string;
  private process?: ChildProcess;
  output = '';

  private constructor(port: number, dir: string) {
    this.port = port;
    this.dir = dir;
  }

  /** With tls, the server also listens with TLS on tlsPort, with a self-signed certificate for 127.0.0.1 in `certificate`. */
  tlsPort?: number;
  certificate?: string;

  static async start(options: { password?: string; tls?: boolean } = {}): Promise<IrcServer> {
    const dir = mkdtempSync(join(tmpdir(), 'gateway-ircd-'));
    chmodSync(dir, 0o755);
    const server = new IrcServer(await freePort(), dir);
    const tls: string[] = [];
    if (options.tls) {
      server.tlsPort = await freePort();
      server.certificate = join(dir, 'cert.pem');
      const made = spawnSync('openssl', [
        'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=127.0.0.1',
        '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', join(dir, 'key.pem'), '-out', server.certificate,
      ], { encoding: 'utf8' });
      if (made.status !== 0) throw new Error(`openssl failed: ${made.stderr}`);
      chmodSync(join(dir, 'key.pem'), 0o644);
      tls.push('[SSL]', `CertFile = ${server.certificate}`, `KeyFile = ${join(dir, 'key.pem')}`, `Ports = ${server.tlsPort}`);
    }
    writeFileSync(join(dir, 'ngircd.conf'), [
      '[Global]',
      'Name = irc.gateway.test',
      'Info = gateway test server',
      'Listen = 127.0.0.1',
      `Ports = ${server.port}`,
      'MotdPhrase = gateway test server',
      ...(options.password ? [`Password = ${options.password}`] : []),
      '[Limits]',
      'MaxConnectionsIP = 0',
      'MaxNickLength = 30',
      'PingTimeout = 120',
      'PongTimeout = 20',
      '[Options]',
      'DNS = no',
      'Ident = no',
      'PAM = no',
      ...tls,
      '',
    ].join('\n'), { mode: 0o644 });
    await server.resume();
    return server;
  }

  /** Starts (or starts again) the server and waits until it accepts connections. */
  async resume(): Promise<void> {
    const child = spawn(NGIRCD, ['--nodaemon', '--config', join(this.dir, 'ngircd.conf')], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.process = child;
    child.stdout!.on('data', (chunk: Buffer) => { this.output += chunk.toString(); });
    child.stderr!.on('data', (chunk: Buffer) => { this.output += chunk.toString(); });
    await waitFor(async () => (child.exitCode === null ? (await portOpen(this.port)) || undefined : Promise.reject(new Error(`ngircd exited:\n${this.output}`))), 10_000, 'ngircd to listen');
  }

  /** Stops the server, dropping every client, and waits until it has exited. */
  async halt(): Promise<void> {
    const child = this.process;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await Promise.race([exited, sleep(5000).then(() => child.kill('SIGKILL'))]);
    await exited;
  }

  async stop(): Promise<void> {
    await this.halt();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

export interface ReceivedMessage {
  from: string;
  target: string;
  text: string;
  /** When it arrived (ms since the epoch). */
  at?: number;
  type: 'privmsg' | 'notice';
}

type Client = {
  connect(options: Record<string, unknown>): void;
  on(event: string, listener: (...args: any[]) => void): void;
  once(event: string, listener: (...args: any[]) => void): void;
  say(target: string, text: string): void;
  join(room: string): void;
  quit(message?: string): void;
  connected: boolean;
};

/** A person on IRC, through the same client library people's bots use. */
export class IrcUser {
  readonly nick: string;
  readonly received: ReceivedMessage[] = [];
  private readonly client: Client;

  private constructor(nick: string, client: Client) {
    this.nick = nick;
    this.client = client;
    const keep = (type: 'privmsg' | 'notice') => (event: { nick?: string; target: string; message: string; from_server?: boolean }) => {
      if (!event.from_server && event.nick) this.received.push({ from: event.nick, target: event.target, text: event.message, type, at: Date.now() });
    };
    client.on('privmsg', keep('privmsg'));
    client.on('notice', keep('notice'));
  }

  static async connect(port: number, nick: string, password?: string): Promise<IrcUser> {
    const { Client } = createRequire(import.meta.url)('irc-framework') as { Client: new () => Client };
    const client = new Client();
    const user = new IrcUser(nick, client);
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${nick} could not register on port ${port}`)), 10_000);
      client.once('registered', () => { clearTimeout(timer); resolve(); });
      client.connect({ host: '127.0.0.1', port, nick, username: nick.replace(/[^A-Za-z0-9]/g, '').slice(0, 9) || 'user', gecos: nick, auto_reconnect: false, ...(password ? { password } : {}) });
    });
    return user;
  }

  say(target: string, text: string): void {
    this.client.say(target, text);
  }

  async join(room: string): Promise<void> {
    const joined = new Promise<void>((resolve) => this.client.on('join', (event: { nick: string; channel: string }) => {
      if (event.nick === this.nick && event.channel.toLowerCase() === room.toLowerCase()) resolve();
    }));
    this.client.join(room);
    await joined;
  }

  /** Waits for a message from `from` matching the pattern, received at index `after` or later. */
  async waitFor(pattern: RegExp, options: { after?: number; timeoutMs?: number } = {}): Promise<ReceivedMessage> {
    return waitFor(() => this.received.slice(options.after ?? 0).find((message) => pattern.test(message.text)), options.timeoutMs ?? 10_000, `${this.nick} to receive ${pattern}`);
  }

  quit(): void {
    try {
      this.client.quit('bye');
    } catch {
      // already gone
    }
  }
}

/** The code in a pairing reply. */
export const codeIn = (text: string): string => {
  const match = /pairing code is ([A-Z2-9]{8})/.exec(text);
  if (!match) throw new Error(`no pairing code in ${JSON.stringify(text)}`);
  return match[1]!;
};
