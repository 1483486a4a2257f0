/**
 * Slack's Socket Mode (https://docs.slack.dev/apis/events-api/using-socket-mode)
 * over the `ws` package Discord's Gateway uses: a connection address from
 * apps.connections.open (with the app-level token), a WebSocket to it,
 * Slack's hello, then events in envelopes, each acknowledged by sending its
 * envelope_id back. It does what @slack/socket-mode did for the gateway
 * (pings every 5/3 s, the connection given up when no pong came for 5 s or
 * no ping from Slack for 30 s after its first, a "disconnect" message closing
 * it), without the second copy of undici that package brings, whose WebSocket
 * and HTTP parser cost an idle daemon several megabytes.
 */
import { EventEmitter } from 'node:events';
import type { WebSocket } from 'ws';
import type { WebClient } from '@slack/web-api';

/** An envelope as the account takes it: what Slack sent and how to acknowledge it. */
export interface SlackEnvelope {
  envelope_id: string;
  type: string;
  body?: Record<string, unknown>;
  retry_num?: number;
  retry_reason?: string;
  accepts_response_payload?: boolean;
  /** Tells Slack the envelope arrived (with a payload, for those that take one); rejects when the connection is gone. */
  ack: (response?: Record<string, unknown>) => Promise<void>;
}

export interface SocketModeOptions {
  /** A Web API client with the app-level token (xapp-...): apps.connections.open. */
  web: WebClient;
  /** How long a ping may go unanswered; pings go three times as often. */
  clientPingTimeoutMs?: number;
  /** How long Slack may go without a ping, once it has sent one. */
  serverPingTimeoutMs?: number;
  /** How long a close may wait for Slack's answer before the connection is dropped. */
  closeTimeoutMs?: number;
}

/**
 * One Socket Mode connection at a time. Emits 'slack_event' (a SlackEnvelope)
 * for each envelope, and 'disconnected' once a connection that said hello is
 * closed, by either side. It never reconnects by itself.
 */
export class SlackSocket extends EventEmitter {
  private readonly options: Required<SocketModeOptions>;
  private socket?: WebSocket;
  private pings?: NodeJS.Timeout;
  private fromSlack?: NodeJS.Timeout;

  constructor(options: SocketModeOptions) {
    super();
    this.options = { clientPingTimeoutMs: 5000, serverPingTimeoutMs: 30_000, closeTimeoutMs: 5000, ...options };
  }

  /** Opens a connection; resolves at Slack's hello, rejects when the address cannot be had or the connection closes before it. */
  async start(): Promise<void> {
    const opened = await this.options.web.apps.connections.open({});
    if (!opened.url) throw new Error('apps.connections.open gave no address');
    const { WebSocket: Socket } = await import('ws');
    const socket = new Socket(opened.url, { handshakeTimeout: 15_000 });
    this.socket = socket;
    await new Promise<void>((resolve, reject) => {
      let hello = false;
      let failure: Error | undefined;
      socket.on('error', (error) => { failure = error; });
      socket.on('open', () => this.watch(socket));
      socket.on('message', (data, binary) => {
        if (binary) return;
        let message: { type?: string; envelope_id?: string; payload?: Record<string, unknown>; retry_attempt?: number; retry_reason?: string; accepts_response_payload?: boolean };
        try {
          message = JSON.parse(String(data)) as typeof message;
        } catch {
          return;
        }
        if (message.type === 'hello') {
          hello = true;
          resolve();
          return;
        }
        if (message.type === 'disconnect') {
          this.close(socket);
          return;
        }
        if (typeof message.envelope_id !== 'string') return;
        const envelopeId = message.envelope_id;
        this.emit('slack_event', {
          envelope_id: envelopeId, type: String(message.type), body: message.payload, retry_num: message.retry_attempt,
          retry_reason: message.retry_reason, accepts_response_payload: message.accepts_response_payload,
          ack: (response = {}) => this.send(socket, { envelope_id: envelopeId, payload: { ...response } }),
        } satisfies SlackEnvelope);
      });
      socket.on('close', () => {
        this.stopWatching();
        if (this.socket === socket) this.socket = undefined;
        if (hello) this.emit('disconnected');
        else reject(failure ?? new Error('Slack closed the Socket Mode connection before its hello'));
      });
    });
  }

  /** Closes the connection (Slack's close answered, or dropped after a while); resolves once it is closed. */
  async disconnect(): Promise<void> {
    const socket = this.socket;
    if (!socket || socket.readyState === socket.CLOSED) return;
    await new Promise<void>((resolve) => {
      socket.once('close', () => resolve());
      this.close(socket);
    });
  }

  private close(socket: WebSocket): void {
    if (socket.readyState === socket.OPEN) {
      socket.close(1000);
      const timer = setTimeout(() => socket.terminate(), this.options.closeTimeoutMs);
      timer.unref();
      socket.once('close', () => clearTimeout(timer));
    } else {
      socket.terminate();
    }
  }

  private send(socket: WebSocket, message: unknown): Promise<void> {
    if (socket.readyState !== socket.OPEN) return Promise.reject(new Error('the Socket Mode connection is not open'));
    return new Promise((resolve, reject) => socket.send(JSON.stringify(message), (error) => (error ? reject(error) : resolve())));
  }

  /** Pings Slack and listens for its pings: a connection that stops answering is closed. */
  private watch(socket: WebSocket): void {
    const { clientPingTimeoutMs, serverPingTimeoutMs } = this.options;
    let lastPong = Date.now();
    socket.on('pong', () => { lastPong = Date.now(); });
    socket.on('ping', () => {
      clearTimeout(this.fromSlack);
      this.fromSlack = setTimeout(() => this.close(socket), serverPingTimeoutMs);
      this.fromSlack.unref();
    });
    this.pings = setInterval(() => {
      if (socket.readyState !== socket.OPEN) return;
      if (Date.now() - lastPong > clientPingTimeoutMs) {
        this.close(socket);
        return;
      }
      socket.ping(Buffer.from(`Ping from client (${Date.now()})`));
    }, clientPingTimeoutMs / 3);
    this.pings.unref();
  }

  private stopWatching(): void {
    clearInterval(this.pings);
    clearTimeout(this.fromSlack);
  }
}
