/**
 * A stand-in for Slack (https://api.slack.com), for what cannot run here: the
 * Web API methods an app uses (auth.test, apps.connections.open,
 * chat.postMessage, users.info) with Slack's own answers for what goes wrong
 * (invalid_auth, channel_not_found, a 429 with Retry-After), and the Socket
 * Mode WebSocket: a hello, events in envelopes, acknowledgements, and events
 * not acknowledged sent again (retry_attempt + 1) on the next connection, as
 * Slack does; buttons pressed (block_actions), over Socket Mode or posted to
 * the interactivity request URL, and chat.postEphemeral. Every Web API call
 * is kept for the tests to read.
 */
import { createHmac, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { WebSocketServer, type WebSocket } from 'ws';

export interface SlackCall { method: string; token: string; body: Record<string, any>; at: number; /** Answered with an error (a scripted fault, or Slack's refusal). */ refused?: boolean }
export type SlackFault = { status: number; retryAfter?: number } | { error: string } | { hang: true };

interface Envelope { envelope_id: string; type: 'events_api'; accepts_response_payload: false; payload: Record<string, unknown>; retry_attempt: number; retry_reason: string }

export interface SlackFile { id: string; name: string; mimetype: string; size: number; url_private: string; url_private_download: string }

export class SlackApi {
  private readonly files = new Map<string, Uint8Array>();
  /** The app's messages: "<channel> <ts>". */
  private readonly postedTs = new Set<string>();
  readonly calls: SlackCall[] = [];
  readonly botToken = 'xoxb-1111-2222-stand-in-bot-token';
  /** The app's signing secret (Slack's documentation's example value). */
  readonly signingSecret = '8f742231b10e8888abcd99yyyzzz85a5';
  readonly appToken = 'xapp-1-A111-3333-stand-in-app-token';
  readonly botUserId = 'UB0TUSER1';
  readonly botName = 'gw-bot';
  private readonly revoked = new Set<string>();
  private readonly faults = new Map<string, SlackFault[]>();
  private readonly unacked = new Map<string, Envelope>();
  readonly acked: string[] = [];
  private readonly channels = new Set(['C0GENERAL1']);
  private readonly users = new Map<string, string>();
  private server?: Server;
  private wss?: WebSocketServer;
  private socket?: WebSocket;
  private counter = 0;
  port = 0;

  get apiRoot(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Listens on a free port, or on `port` (the same API back after stop, with what it knew). */
  async start(port = 0): Promise<this> {
    this.server = createServer((req, res) => void this.answer(req, res));
    this.wss = new WebSocketServer({ noServer: true });
    this.server.on('upgrade', (req, socket, head) => {
      if (!req.url?.startsWith('/link/')) return socket.destroy();
      this.wss!.handleUpgrade(req, socket, head, (ws) => this.connected(ws));
    });
    await new Promise<void>((resolve) => this.server!.listen(port, '127.0.0.1', resolve));
    this.port = (this.server.address() as { port: number }).port;
    return this;
  }

  async stop(): Promise<void> {
    for (const client of this.wss?.clients ?? []) client.terminate();
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => this.server?.close(() => resolve()) ?? resolve());
  }

  /** A person with a display name. */
  user(id: string, name: string): string {
    this.users.set(id, name);
    return id;
  }

  channel(id: string): string {
    this.channels.add(id);
    return id;
  }

  revoke(token: string): void {
    this.revoked.add(token);
    this.socket?.close(1000);
  }

  fail(method: string, ...faults: SlackFault[]): void {
    this.faults.set(method, [...(this.faults.get(method) ?? []), ...faults]);
  }

  /** Whether an app is connected over Socket Mode now. */
  get connectedNow(): boolean {
    return this.socket?.readyState === 1;
  }

  /** An event as Slack sends it (message, app_mention, or anything else), in an envelope; kept until acknowledged. */
  event(event: Record<string, unknown>): Envelope {
    const envelope: Envelope = {
      envelope_id: randomUUID(), type: 'events_api', accepts_response_payload: false, retry_attempt: 0, retry_reason: '',
      payload: { token: 'verification', team_id: 'T0TEAM', api_app_id: 'A111', type: 'event_callback', event_id: `Ev${++this.counter}`, event_time: Math.floor(Date.now() / 1000), event },
    };
    this.unacked.set(envelope.envelope_id, envelope);
    this.socket?.send(JSON.stringify(envelope));
    return envelope;
  }

  /** A person's message: in a direct conversation (D...) or a channel; with files, a file_share message as Slack sends it. */
  message(fields: { user: string; channel: string; text: string; thread_ts?: string; files?: SlackFile[] }): Envelope {
    const ts = `${Math.floor(Date.now() / 1000)}.${String(++this.counter).padStart(6, '0')}`;
    return this.event({ type: 'message', ...(fields.files ? { subtype: 'file_share' } : {}), channel_type: fields.channel.startsWith('D') ? 'im' : 'channel', event_ts: ts, ts, ...fields });
  }

  /**
   * The Events API: posts a payload to the app's request URL signed as Slack
   * signs it (v0=HMAC-SHA256 of "v0:<timestamp>:<body>" with the signing
   * secret); the status and body the app answered. A string is posted as it is.
   */
  async post(url: string, payload: Record<string, unknown> | string, options: { secret?: string; timestamp?: number; retry?: number } = {}): Promise<{ status: number; body: any }> {
    const body = typeof payload === 'string' ? payload : JSON.stringify(payload);
    const timestamp = String(options.timestamp ?? Math.floor(Date.now() / 1000));
    const signature = `v0=${createHmac('sha256', options.secret ?? this.signingSecret).update(`v0:${timestamp}:${body}`).digest('hex')}`;
    const response = await fetch(url, {
      method: 'POST', body,
      headers: {
        'content-type': 'application/json', 'x-slack-request-timestamp': timestamp, 'x-slack-signature': signature,
        ...(options.retry ? { 'x-slack-retry-num': String(options.retry), 'x-slack-retry-reason': 'http_timeout' } : {}),
      },
    });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : undefined };
  }

  /** An event_callback as the Events API posts it, for a person's message. */
  eventCallback(fields: { user: string; channel: string; text: string; thread_ts?: string }): Record<string, unknown> {
    const ts = `${Math.floor(Date.now() / 1000)}.${String(++this.counter).padStart(6, '0')}`;
    return {
      token: 'deprecated-verification-token', team_id: 'T0TEAM', api_app_id: 'A111', type: 'event_callback', event_id: `Ev${String(++this.counter).padStart(8, '0')}`, event_time: Math.floor(Date.now() / 1000),
      event: { type: 'message', channel_type: fields.channel.startsWith('D') ? 'im' : 'channel', event_ts: ts, ts, ...fields },
    };
  }

  /**
   * A person presses a button of a message's actions block: the
   * block_actions interaction Slack sends, over Socket Mode (an
   * "interactive" envelope) or, given the app's request URL, posted there
   * as Slack posts interactivity requests (a form with the JSON in
   * `payload`, signed like every request).
   */
  blockAction(fields: { user: string; channel: string; messageTs: string; value: string }): Record<string, unknown> {
    return {
      type: 'block_actions', team: { id: 'T0TEAM' }, api_app_id: 'A111', trigger_id: `trig.${++this.counter}`,
      user: { id: fields.user, username: this.users.get(fields.user)?.toLowerCase() ?? fields.user, name: this.users.get(fields.user) ?? fields.user },
      container: { type: 'message', message_ts: fields.messageTs, channel_id: fields.channel, is_ephemeral: false },
      channel: { id: fields.channel }, message: { type: 'message', ts: fields.messageTs },
      response_url: `http://127.0.0.1:${this.port}/actions/response`,
      actions: [{ type: 'button', action_id: 'gw_0', block_id: 'b1', value: fields.value, action_ts: String(Date.now() / 1000) }],
    };
  }

  /** An interaction over Socket Mode: kept until acknowledged, as events are. */
  interactive(payload: Record<string, unknown>): void {
    const envelope = { envelope_id: randomUUID(), type: 'interactive', accepts_response_payload: true, payload } as unknown as Envelope;
    this.unacked.set(envelope.envelope_id, envelope);
    this.socket?.send(JSON.stringify(envelope));
  }

  /** An interactivity request posted to the app's URL, signed; the status and body it answered. */
  async interact(url: string, payload: Record<string, unknown>, options: { secret?: string } = {}): Promise<{ status: number; body: any }> {
    const body = new URLSearchParams({ payload: JSON.stringify(payload) }).toString();
    const timestamp = String(Math.floor(Date.now() / 1000));
    const signature = `v0=${createHmac('sha256', options.secret ?? this.signingSecret).update(`v0:${timestamp}:${body}`).digest('hex')}`;
    const response = await fetch(url, { method: 'POST', body, headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-slack-request-timestamp': timestamp, 'x-slack-signature': signature } });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : undefined };
  }

  /** What the app told one person alone (chat.postEphemeral), in order. */
  ephemeral(user?: string): SlackCall[] {
    return this.calls.filter((call) => call.method === 'chat.postEphemeral' && !call.refused && (user === undefined || call.body.user === user));
  }

  /** A file a user shares: its url_private_download answers the bot token only, as Slack's does. */
  file(data: Uint8Array, name: string, mimetype: string): SlackFile {
    const id = `F0FILE${this.files.size}`;
    this.files.set(id, data);
    return { id, name, mimetype, size: data.length, url_private: `http://127.0.0.1:${this.port}/files-pri/T0TEAM-${id}/${name}`, url_private_download: `http://127.0.0.1:${this.port}/files-pri/T0TEAM-${id}/download/${name}` };
  }

  /** Edits the app made to its messages in a conversation, in order. */
  updated(channel?: string): SlackCall[] {
    return this.calls.filter((call) => call.method === 'chat.update' && !call.refused && (channel === undefined || call.body.channel === channel));
  }

  /** Reactions the app put: "<channel> <ts> <name>". */
  readonly reactions: string[] = [];

  /** Messages the app posted to a conversation (and thread), in order; with all, the calls Slack refused too. */
  posted(channel?: string, options: { all?: boolean } = {}): SlackCall[] {
    return this.calls.filter((call) => call.method === 'chat.postMessage' && (channel === undefined || call.body.channel === channel) && (options.all || !call.refused));
  }

  private connected(ws: WebSocket): void {
    this.socket?.terminate();
    this.socket = ws;
    ws.send(JSON.stringify({ type: 'hello', num_connections: 1, connection_info: { app_id: 'A111' } }));
    // What the previous connection left unacknowledged comes again, marked as a retry.
    for (const envelope of this.unacked.values()) {
      envelope.retry_attempt++;
      envelope.retry_reason = 'timeout';
      ws.send(JSON.stringify(envelope));
    }
    ws.on('message', (data) => {
      const message = JSON.parse(String(data)) as { envelope_id?: string };
      if (message.envelope_id && this.unacked.delete(message.envelope_id)) this.acked.push(message.envelope_id);
    });
  }

  /** Files uploaded through files.getUploadURLExternal, by file id: their bytes, and where completeUploadExternal shared them. */
  readonly uploads = new Map<string, { name: string; length: number; data?: Uint8Array; channel?: string; thread?: string; comment?: string }>();

  private async answer(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    // The upload address files.getUploadURLExternal gave (https://docs.slack.dev/messaging/working-with-files#upload): the bytes, posted as they are.
    const upload = /^\/upload\/(F0UP\d+)$/.exec(req.url ?? '');
    if (upload) {
      const entry = this.uploads.get(upload[1]!);
      if (!entry || entry.data) return void res.writeHead(404).end();
      entry.data = new Uint8Array(Buffer.concat(chunks));
      return void res.writeHead(200, { 'content-type': 'text/plain' }).end(`OK - ${entry.data.length}`);
    }
    const download = /^\/files-pri\/T0TEAM-(F0FILE\d+)\//.exec(req.url ?? '');
    if (download) {
      this.calls.push({ method: 'file', token: String(req.headers.authorization ?? '').replace(/^Bearer /, ''), body: { id: download[1] }, at: Date.now() });
      const data = this.files.get(download[1]!);
      // Without the bot token Slack answers with its sign-in page, not the file.
      if (req.headers.authorization !== `Bearer ${this.botToken}`) return void res.writeHead(200, { 'content-type': 'text/html' }).end('<html>Sign in to Slack</html>');
      if (!data) return void res.writeHead(404).end();
      return void res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(data.length) }).end(data);
    }
    const method = (req.url ?? '').replace(/^\/api\//, '').split('?')[0]!;
    const type = req.headers['content-type'] ?? '';
    const body: Record<string, any> = type.includes('json') ? JSON.parse(text || '{}') : Object.fromEntries(new URLSearchParams(text));
    const token = String(req.headers.authorization ?? '').replace(/^Bearer /, '') || String(body.token ?? '');
    const call: SlackCall = { method, token, body, at: Date.now() };
    this.calls.push(call);
    const send = (status: number, payload: unknown, headers: Record<string, string> = {}) => {
      if (status !== 200 || !(payload as { ok?: boolean }).ok) call.refused = true;
      res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(payload));
    };
    const ok = (fields: Record<string, unknown>) => send(200, { ok: true, ...fields });
    const error = (code: string) => send(200, { ok: false, error: code });

    const fault = this.faults.get(method)?.shift();
    if (fault && 'hang' in fault) return;
    if (fault && 'status' in fault) return send(fault.status, { ok: false, error: fault.status === 429 ? 'ratelimited' : 'internal_error' }, fault.retryAfter !== undefined ? { 'retry-after': String(fault.retryAfter) } : {});
    if (fault) return error(fault.error);

    const isBot = token === this.botToken && !this.revoked.has(token);
    const isApp = token === this.appToken && !this.revoked.has(token);
    switch (method) {
      case 'auth.test':
        return isBot ? ok({ url: 'https://stand-in.slack.com/', team: 'Stand-in', user: this.botName, team_id: 'T0TEAM', user_id: this.botUserId, bot_id: 'B0BOT' }) : error('invalid_auth');
      case 'apps.connections.open':
        return isApp ? ok({ url: `ws://127.0.0.1:${this.port}/link/?ticket=${randomUUID()}` }) : error('invalid_auth');
      case 'users.info': {
        if (!isBot) return error('invalid_auth');
        const name = this.users.get(String(body.user));
        return name ? ok({ user: { id: body.user, name: name.toLowerCase(), real_name: name, profile: { display_name: name, real_name: name } } }) : error('user_not_found');
      }
      case 'chat.postMessage': {
        if (!isBot) return error('invalid_auth');
        const channel = String(body.channel ?? '');
        if (!channel.startsWith('D') && !channel.startsWith('U') && !this.channels.has(channel)) return error('channel_not_found');
        const content = String(body.text ?? '');
        if (!content.trim()) return error('no_text');
        if (content.length > 40_000) return error('msg_too_long');
        const ts = `${Math.floor(Date.now() / 1000)}.${String(++this.counter).padStart(6, '0')}`;
        this.postedTs.add(`${channel} ${ts}`);
        return ok({ channel, ts, message: { type: 'message', text: content, user: this.botUserId, ts, ...(body.thread_ts ? { thread_ts: body.thread_ts } : {}) } });
      }
      case 'chat.postEphemeral': {
        if (!isBot) return error('invalid_auth');
        const channel = String(body.channel ?? '');
        if (!channel.startsWith('D') && !this.channels.has(channel)) return error('channel_not_found');
        if (!String(body.text ?? '').trim()) return error('no_text');
        return ok({ message_ts: `${Math.floor(Date.now() / 1000)}.${String(++this.counter).padStart(6, '0')}` });
      }
      case 'chat.update': {
        if (!isBot) return error('invalid_auth');
        if (!this.postedTs.has(`${String(body.channel)} ${String(body.ts)}`)) return error('message_not_found');
        const content = String(body.text ?? '');
        if (content.length > 40_000) return error('msg_too_long');
        return ok({ channel: body.channel, ts: body.ts, text: content });
      }
      case 'reactions.add': {
        if (!isBot) return error('invalid_auth');
        const key = `${String(body.channel)} ${String(body.timestamp)} ${String(body.name)}`;
        if (!String(body.name ?? '').match(/^[a-z0-9_+-]+$/)) return error('invalid_name');
        if (this.reactions.includes(key)) return error('already_reacted');
        this.reactions.push(key);
        return ok({});
      }
      case 'files.getUploadURLExternal': {
        if (!isBot) return error('invalid_auth');
        const length = Number(body.length);
        if (!body.filename || !Number.isInteger(length) || length <= 0) return error('invalid_arguments');
        const id = `F0UP${++this.counter}`;
        this.uploads.set(id, { name: String(body.filename), length });
        return ok({ upload_url: `http://127.0.0.1:${this.port}/upload/${id}`, file_id: id });
      }
      case 'files.completeUploadExternal': {
        if (!isBot) return error('invalid_auth');
        const files = typeof body.files === 'string' ? JSON.parse(body.files) : body.files;
        const channel = String(body.channel_id ?? '');
        if (channel && !channel.startsWith('D') && !this.channels.has(channel)) return error('channel_not_found');
        for (const file of files ?? []) {
          const entry = this.uploads.get(String(file.id));
          if (!entry?.data || entry.data.length !== entry.length) return error('file_upload_size_mismatch');
          Object.assign(entry, { channel, ...(body.thread_ts ? { thread: String(body.thread_ts) } : {}), ...(body.initial_comment ? { comment: String(body.initial_comment) } : {}) });
        }
        return ok({ files: (files ?? []).map((file: { id: string }) => ({ id: file.id })) });
      }
      default:
        return error('unknown_method');
    }
  }
}
