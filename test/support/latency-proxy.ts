/**
 * A TCP proxy on loopback that adds a round trip's worth of latency to every
 * connection through it: what a server one network hop away costs. Whatever
 * the server sends back is held `delayMs` before it is passed on (requests go
 * through at once), in order, so each request-and-answer takes `delayMs`
 * more, whatever its size. Used by the tests and the benchmark to put
 * PostgreSQL "across the network" on one machine.
 */
import { createServer, type Server, type Socket, connect } from 'node:net';

export class LatencyProxy {
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();
  /** The added latency, in ms: changed, it applies to what the server sends from then on. */
  delayMs: number;
  port = 0;

  private constructor(target: { host: string; port: number }, delayMs: number) {
    this.delayMs = delayMs;
    this.server = createServer((client) => {
      const upstream = connect(target.port, target.host);
      this.sockets.add(client).add(upstream);
      client.setNoDelay(true);
      upstream.setNoDelay(true);
      client.on('data', (chunk) => upstream.write(chunk));
      delayed(upstream, client, () => this.delayMs);
      const close = () => {
        client.destroy();
        upstream.destroy();
        this.sockets.delete(client);
        this.sockets.delete(upstream);
      };
      client.on('close', close).on('error', close);
      upstream.on('close', close).on('error', close);
    });
  }

  /** Listens on a free loopback port in front of the target. */
  static async start(target: { host: string; port: number }, delayMs: number): Promise<LatencyProxy> {
    const proxy = new LatencyProxy(target, delayMs);
    await new Promise<void>((resolve) => proxy.server.listen(0, '127.0.0.1', () => resolve()));
    proxy.port = (proxy.server.address() as { port: number }).port;
    return proxy;
  }

  /** Drops every connection through it (a network that fails), leaving the proxy listening. */
  cut(): void {
    for (const socket of this.sockets) socket.destroy();
    this.sockets.clear();
  }

  async stop(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** Passes what `from` sends on to `to`, each chunk the delay after it came, in order. */
function delayed(from: Socket, to: Socket, delay: () => number): void {
  const held: { due: number; chunk: Buffer }[] = [];
  let timer: NodeJS.Timeout | undefined;
  const flush = () => {
    timer = undefined;
    const now = performance.now();
    while (held.length > 0 && held[0]!.due <= now + 0.2) to.write(held.shift()!.chunk);
    if (held.length > 0) timer = setTimeout(flush, held[0]!.due - now);
  };
  from.on('data', (chunk) => {
    held.push({ due: performance.now() + delay(), chunk });
    timer ??= setTimeout(flush, delay());
  });
}

// `node test/support/latency-proxy.ts <host> <port> <delayMs>`: a proxy in a process of its own (the benchmark's),
// printing its port once it listens, until it is killed.
if (import.meta.main) {
  const [host = '127.0.0.1', port = '5432', delay = '1'] = process.argv.slice(2);
  const proxy = await LatencyProxy.start({ host, port: Number(port) }, Number(delay));
  process.stdout.write(`${proxy.port}\n`);
}
