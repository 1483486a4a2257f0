/**
 * The one way out of a browser's sandbox: an HTTP proxy on a unix socket
 * that only that browser's sandbox can reach (bound into it; the browser has
 * no network of its own). Every request the browser makes comes here, the
 * page's own and Chromium's, http in absolute form, https and WebSockets as
 * CONNECT tunnels: the proxy resolves the name itself, holds every address
 * to the address guard (address-guard.ts, the same rules and
 * tools.web.allowPrivate as web.fetch) and connects to exactly the address it
 * checked, so no lookup of the browser's or later one of its own can lead
 * elsewhere. A refused request gets a 403 saying why (a page sees it as the
 * answer, a tunnel fails), and the refusal is kept for the tool call to
 * report.
 */
import { createServer, request as httpRequest, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { AddressRefused, checkedAddresses, type Resolver } from './address-guard.ts';

export interface ProxyOptions {
  /** The host:port pairs allowed although private (read at each request: a changed setting holds at once). */
  allowPrivate: () => readonly string[];
  resolve: Resolver;
  /** Connections the browser may hold open through the proxy at once. */
  maxConnections: number;
  /** Longest a connection to a server may take to be made. */
  connectTimeoutMs: number;
}

/** A request the proxy refused: where it went and why. */
export interface Refusal {
  url: string;
  reason: string;
}

/** Refusals kept for the tool calls to report, the latest. */
const KEPT_REFUSALS = 50;

/** Headers that concern one hop (RFC 9110 section 7.6.1), never passed on. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'proxy-authorization', 'proxy-authenticate', 'te', 'trailer', 'transfer-encoding', 'upgrade']);

/** Where the browser is told a refusal comes from: a header its tool calls look for on the page's own answer. */
export const REFUSED_HEADER = 'x-gateway-refused';

const WHO = 'the browser';

function passedOn(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const named = new Set(String(headers.connection ?? '').toLowerCase().split(',').map((name) => name.trim()).filter(Boolean));
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || named.has(name)) continue;
    out[name] = value;
  }
  return out;
}

/** host and port of a CONNECT's authority ("example.org:443", "[2001:db8::1]:443"), or undefined. */
function authority(text: string | undefined): { host: string; port: number } | undefined {
  const match = /^(\[[0-9A-Fa-f:.]+\]|[^\s:/[\]@]+):(\d{1,5})$/.exec(text ?? '');
  const port = Number(match?.[2]);
  if (!match || !(port >= 1 && port <= 65_535)) return undefined;
  return { host: match[1]!.replace(/^\[|\]$/g, ''), port };
}

export class BrowserProxy {
  private readonly server: Server;
  private readonly options: ProxyOptions;
  private readonly sockets = new Set<Duplex>();
  private readonly kept: (Refusal & { seq: number })[] = [];
  private readonly failures: (Refusal & { seq: number })[] = [];
  private seq = 0;

  private constructor(options: ProxyOptions) {
    this.options = options;
    this.server = createServer({ headersTimeout: 30_000, requestTimeout: 0, keepAliveTimeout: 30_000 }, (req, res) => void this.forward(req, res));
    this.server.maxConnections = options.maxConnections;
    this.server.on('connection', (socket) => this.hold(socket));
    this.server.on('connect', (req: IncomingMessage, socket: Duplex, head: Buffer) => void this.tunnel(req, socket, head));
    this.server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => void this.upgrade(req, socket, head));
    this.server.on('clientError', (_error, socket) => socket.destroy());
  }

  /** A proxy listening on a unix socket at `path`. */
  static async listen(path: string, options: ProxyOptions): Promise<BrowserProxy> {
    const proxy = new BrowserProxy(options);
    await new Promise<void>((resolve, reject) => {
      proxy.server.once('error', reject);
      proxy.server.listen(path, () => {
        proxy.server.off('error', reject);
        resolve();
      });
    });
    return proxy;
  }

  /** Where the refusals stand now: `refusedSince` answers those after it. */
  mark(): number {
    return this.seq;
  }

  refusedSince(mark: number): Refusal[] {
    return this.kept.filter((refusal) => refusal.seq > mark).map(({ url, reason }) => ({ url, reason }));
  }

  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const socket of this.sockets) socket.destroy();
    await closed;
  }

  private hold(socket: Duplex): void {
    this.sockets.add(socket);
    socket.on('close', () => this.sockets.delete(socket));
    socket.on('error', () => socket.destroy());
  }

  private refuse(url: string, reason: string): void {
    this.kept.push({ url, reason, seq: ++this.seq });
    if (this.kept.length > KEPT_REFUSALS) this.kept.shift();
  }

  /**
   * The addresses to connect to, or why not: a refusal (recorded, and
   * reported), or a name that does not resolve (no refusal: nothing was
   * judged; kept to say why a navigation failed).
   */
  private async checked(url: string, host: string, port: number): Promise<{ addresses: { address: string; family: number }[] } | { reason: string; refused: boolean }> {
    try {
      return { addresses: await checkedAddresses(host, port, this.options.allowPrivate(), this.options.resolve, WHO) };
    } catch (error) {
      if (!(error instanceof AddressRefused)) {
        const reason = `${host} could not be resolved (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}).`;
        this.failures.push({ url, reason, seq: this.seq });
        if (this.failures.length > KEPT_REFUSALS) this.failures.shift();
        return { reason, refused: false };
      }
      this.refuse(url, error.message);
      return { reason: error.message, refused: true };
    }
  }

  /** The latest request since a mark that failed for want of an address. */
  failedSince(mark: number): Refusal | undefined {
    const failure = this.failures.at(-1);
    return failure && failure.seq >= mark ? { url: failure.url, reason: failure.reason } : undefined;
  }

  /** A socket to the first of the checked addresses that answers. */
  private async open(addresses: { address: string; family: number }[], port: number): Promise<Socket> {
    let last: unknown;
    for (const { address, family } of addresses) {
      try {
        return await new Promise<Socket>((resolve, reject) => {
          const socket = connect({ host: address, port, family, timeout: this.options.connectTimeoutMs });
          socket.once('connect', () => {
            socket.setTimeout(0);
            socket.off('error', reject);
            resolve(socket);
          });
          socket.once('timeout', () => socket.destroy(Object.assign(new Error('timed out'), { code: 'ETIMEDOUT' })));
          socket.once('error', reject);
        });
      } catch (error) {
        last = error;
      }
    }
    throw last;
  }

  /** An http request in absolute form, passed on to the address checked. */
  private async forward(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let target: URL;
    try {
      target = new URL(req.url ?? '');
    } catch {
      res.writeHead(400, { 'content-type': 'text/plain' }).end('The gateway\'s proxy takes requests in absolute form only.');
      return;
    }
    if (target.protocol !== 'http:') {
      res.writeHead(400, { 'content-type': 'text/plain' }).end(`The gateway's proxy does not take ${target.protocol} requests.`);
      return;
    }
    const port = Number(target.port || 80);
    const checked = await this.checked(target.toString(), target.hostname, port);
    if ('reason' in checked) {
      if (checked.refused) res.writeHead(403, { 'content-type': 'text/plain; charset=utf-8', [REFUSED_HEADER]: '1', 'cache-control': 'no-store' }).end(`The gateway refused this request: ${checked.reason}\n`);
      else res.writeHead(502, { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' }).end(`${checked.reason}\n`);
      req.resume();
      return;
    }
    let socket: Socket;
    try {
      socket = await this.open(checked.addresses, port);
    } catch (error) {
      res.writeHead(502, { 'content-type': 'text/plain; charset=utf-8' }).end(`${target.host} could not be reached (${(error as NodeJS.ErrnoException).code ?? 'error'}).\n`);
      req.resume();
      return;
    }
    const upstream = httpRequest({
      createConnection: () => socket, method: req.method, path: `${target.pathname}${target.search}`, headers: passedOn(req.headers), setHost: false,
    }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.statusMessage, passedOn(answer.headers));
      answer.pipe(res);
      answer.on('error', () => res.destroy());
    });
    upstream.on('error', () => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' }).end(`${target.host} closed the connection.\n`);
      else res.destroy();
    });
    res.on('close', () => upstream.destroy());
    req.pipe(upstream);
  }

  /** A CONNECT tunnel (https, wss), opened to the address checked. */
  private async tunnel(req: IncomingMessage, client: Duplex, head: Buffer): Promise<void> {
    this.hold(client);
    const target = authority(req.url);
    if (!target) {
      client.end('HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
      return;
    }
    const named = target.host.includes(':') ? `[${target.host}]` : target.host;
    // A tunnel carries https or a WebSocket: it is named by its host and port.
    const checked = await this.checked(`${named}:${target.port}`, target.host, target.port);
    if ('reason' in checked) {
      const body = checked.refused ? `The gateway refused this request: ${checked.reason}\n` : `${checked.reason}\n`;
      const status = checked.refused ? `403 Forbidden\r\n${REFUSED_HEADER}: 1` : '502 Bad Gateway';
      client.end(`HTTP/1.1 ${status}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
      return;
    }
    let socket: Socket;
    try {
      socket = await this.open(checked.addresses, target.port);
    } catch {
      client.end('HTTP/1.1 502 Bad Gateway\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
      return;
    }
    if (client.destroyed) {
      socket.destroy();
      return;
    }
    this.hold(socket);
    client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    if (head.length > 0) socket.write(head);
    socket.pipe(client);
    client.pipe(socket);
    socket.on('close', () => client.destroy());
    client.on('close', () => socket.destroy());
  }

  /** A WebSocket asked for in absolute form (ws:// without a tunnel): the request written to the address checked, then piped. */
  private async upgrade(req: IncomingMessage, client: Duplex, head: Buffer): Promise<void> {
    this.hold(client);
    let target: URL;
    try {
      target = new URL(req.url ?? '');
    } catch {
      client.end('HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
      return;
    }
    const port = Number(target.port || 80);
    const checked = target.protocol === 'http:' || target.protocol === 'ws:' ? await this.checked(target.toString(), target.hostname, port) : { reason: 'not http' };
    if ('reason' in checked) {
      client.end(`HTTP/1.1 403 Forbidden\r\n${REFUSED_HEADER}: 1\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`);
      return;
    }
    let socket: Socket;
    try {
      socket = await this.open(checked.addresses, port);
    } catch {
      client.end('HTTP/1.1 502 Bad Gateway\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
      return;
    }
    this.hold(socket);
    const lines = [`${req.method} ${target.pathname}${target.search} HTTP/1.1`];
    for (let i = 0; i < req.rawHeaders.length; i += 2) {
      const name = req.rawHeaders[i]!;
      if (/^proxy-/i.test(name)) continue;
      lines.push(`${name}: ${req.rawHeaders[i + 1]}`);
    }
    socket.write(`${lines.join('\r\n')}\r\n\r\n`);
    if (head.length > 0) socket.write(head);
    socket.pipe(client);
    client.pipe(socket);
    socket.on('close', () => client.destroy());
    client.on('close', () => socket.destroy());
  }
}
