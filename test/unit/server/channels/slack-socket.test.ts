import { expect } from 'chai';
import { createServer, type Server } from 'node:http';
import { WebClient } from '@slack/web-api';
import { WebSocketServer, type WebSocket } from 'ws';
import { channelFetch } from '../../../../src/server/channels/http-fetch.ts';
import { SlackSocket, type SlackEnvelope } from '../../../../src/server/channels/slack/socket-mode.ts';

/** Slack as Socket Mode meets it: apps.connections.open for the app token, then the WebSocket it names. */
class SocketSlack {
  readonly server: Server;
  readonly wss: WebSocketServer;
  readonly sockets: WebSocket[] = [];
  readonly received: unknown[] = [];
  opened = 0;
  /** What a new connection is sent first (Slack's hello, unless a test says otherwise). */
  greeting: unknown = { type: 'hello', num_connections: 1, connection_info: { app_id: 'A1' } };

  constructor(options: { autoPong?: boolean } = {}) {
    this.wss = new WebSocketServer({ noServer: true, autoPong: options.autoPong ?? true });
    this.server = createServer((req, res) => {
      const port = (this.server.address() as { port: number }).port;
      this.opened++;
      const ok = req.url === '/api/apps.connections.open' && req.headers.authorization === 'Bearer xapp-1';
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(ok ? { ok: true, url: `ws://127.0.0.1:${port}/link/?ticket=t` } : { ok: false, error: 'invalid_auth' }));
    });
    this.server.on('upgrade', (req, socket, head) => this.wss.handleUpgrade(req, socket, head, (ws) => {
      this.sockets.push(ws);
      ws.on('message', (data) => this.received.push(JSON.parse(String(data))));
      if (this.greeting) ws.send(JSON.stringify(this.greeting));
      else ws.close(1011);
    }));
  }

  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as { port: number }).port}/api/`;
  }

  async stop(): Promise<void> {
    for (const ws of this.wss.clients) ws.terminate();
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

const until = async (check: () => boolean, ms = 5000) => {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
};

describe('Slack Socket Mode client', function () {
  this.timeout(20_000);
  let slack: SocketSlack;
  let client: SlackSocket | undefined;
  afterEach(async () => {
    await client?.disconnect();
    client = undefined;
    await slack.stop();
  });

  const connect = async (token = 'xapp-1', options: { clientPingTimeoutMs?: number; serverPingTimeoutMs?: number } = {}) => {
    const slackApiUrl = await slack.listen();
    client = new SlackSocket({ web: new WebClient(token, { slackApiUrl, retryConfig: { retries: 0 }, fetch: channelFetch }), ...options });
    return client;
  };

  it('connects at Slack\'s hello, hands on each envelope, and acknowledges it with its envelope_id', async () => {
    slack = new SocketSlack();
    const socket = await connect();
    const envelopes: SlackEnvelope[] = [];
    socket.on('slack_event', (envelope: SlackEnvelope) => envelopes.push(envelope));
    await socket.start();
    slack.sockets[0]!.send(JSON.stringify({ envelope_id: 'e1', type: 'events_api', accepts_response_payload: false, retry_attempt: 1, retry_reason: 'timeout', payload: { event: { type: 'message', text: 'hi' } } }));
    slack.sockets[0]!.send('not json');
    await until(() => envelopes.length === 1);
    expect(envelopes[0]).to.include({ envelope_id: 'e1', type: 'events_api', retry_num: 1, retry_reason: 'timeout' });
    expect(envelopes[0]!.body).to.deep.equal({ event: { type: 'message', text: 'hi' } });
    await envelopes[0]!.ack();
    await until(() => slack.received.length === 1);
    expect(slack.received[0]).to.deep.equal({ envelope_id: 'e1', payload: {} });
  });

  it('a refused app token fails the start with Slack\'s error; a connection closed before the hello fails it too', async () => {
    slack = new SocketSlack();
    const refused = await connect('xapp-wrong');
    const error = await refused.start().then(() => undefined, (failure: unknown) => failure);
    expect((error as { data?: { error?: string } }).data?.error).to.equal('invalid_auth');
    slack.greeting = undefined;
    const closed = new SlackSocket({ web: new WebClient('xapp-1', { slackApiUrl: `http://127.0.0.1:${(slack.server.address() as { port: number }).port}/api/`, retryConfig: { retries: 0 }, fetch: channelFetch }) });
    const early = await closed.start().then(() => undefined, (failure: unknown) => failure);
    expect(String(early)).to.match(/before its hello/);
  });

  it('closes when Slack says disconnect, or stops answering pings, and says so once each time', async () => {
    slack = new SocketSlack({ autoPong: false });
    const socket = await connect('xapp-1', { clientPingTimeoutMs: 300 });
    let disconnected = 0;
    socket.on('disconnected', () => disconnected++);
    await socket.start();
    // No pong for longer than the client waits: the connection is given up.
    await until(() => disconnected === 1);
    expect(slack.sockets[0]!.readyState).to.be.oneOf([2, 3]);

    slack.wss.options.autoPong = true;
    await socket.start();
    slack.sockets[1]!.send(JSON.stringify({ type: 'disconnect', reason: 'refresh_requested' }));
    await until(() => disconnected === 2);
    expect(slack.opened).to.equal(2);
  });
});
