/**
 * A stand-in for Discord (https://discord.com/developers/docs), for what
 * cannot run here: the Gateway (HELLO, heartbeats, IDENTIFY, READY,
 * MESSAGE_CREATE dispatches with sequence numbers, RESUME that replays what
 * a session missed, RECONNECT, close 4004 for a bad token) and the REST
 * calls a bot makes (GET /gateway/bot, POST /channels/{id}/messages,
 * POST /channels/{id}/typing, POST /users/@me/channels), with Discord's own
 * answers for what goes wrong (401, 404 Unknown Channel, a 429 with
 * retry_after); buttons pressed (INTERACTION_CREATE) and the answers to them
 * (POST /interactions/{id}/{token}/callback). Every REST call is kept for the
 * tests to read.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { WebSocketServer, type WebSocket } from 'ws';

export interface DiscordCall { method: string; path: string; token: string; body: Record<string, any>; at: number; refused?: boolean; /** What the stand-in answered. */ response?: any }
export type DiscordFault = { status: number; retryAfter?: number; code?: number; message?: string } | { hang: true };
export interface DiscordUser { id: string; username: string; global_name?: string; bot?: boolean }

interface Session { id: string; token: string; seq: number; events: { s: number; t: string; d: unknown }[]; socket?: WebSocket; identified: boolean }

let snowflake = 1_100_000_000_000_000_000n;
export const nextId = () => String(++snowflake);

export interface DiscordAttachment { id: string; filename: string; size: number; url: string; proxy_url: string; content_type?: string }

export class DiscordApi {
  private readonly files = new Map<string, Uint8Array>();
  /** The bot's messages, by id: the channel each is in. */
  private readonly posted = new Map<string, string>();
  readonly calls: DiscordCall[] = [];
  readonly token = 'MTAx.stand-in.bot-token-value';
  readonly bot: DiscordUser = { id: '1099999999999999999', username: 'gw-bot', bot: true };
  readonly guildId = '1000000000000000001';
  private readonly revoked = new Set<string>();
  private readonly faults = new Map<string, DiscordFault[]>();
  private readonly sessions = new Map<string, Session>();
  /** DM channels by recipient. */
  private readonly dms = new Map<string, string>();
  private readonly channels = new Set<string>();
  readonly identifies: number[] = [];
  readonly resumes: { sessionId: string; seq: number }[] = [];
  private server?: Server;
  private wss?: WebSocketServer;
  port = 0;

  get apiRoot(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Listens on a free port, or on `port` (the same API back after stop, with its channels and sessions). */
  async start(port = 0): Promise<this> {
    this.server = createServer((req, res) => void this.answer(req, res));
    this.wss = new WebSocketServer({ noServer: true });
    this.server.on('upgrade', (req, socket, head) => {
      if (!req.url?.startsWith('/gateway')) return socket.destroy();
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

  channel(id = nextId()): string {
    this.channels.add(id);
    return id;
  }

  /** Threads (channel type 11, a public thread) by id, with the channel they are in. */
  private readonly threads = new Map<string, string>();

  /** A public thread in a channel: a channel of its own (its messages carry its id), whose parent_id is that channel. */
  thread(parent: string): string {
    const id = this.channel();
    this.threads.set(id, parent);
    return id;
  }

  /** The DM channel of a person and the bot. */
  dmOf(user: DiscordUser): string {
    let id = this.dms.get(user.id);
    if (!id) {
      id = nextId();
      this.dms.set(user.id, id);
      this.channels.add(id);
    }
    return id;
  }

  revoke(token: string): void {
    this.revoked.add(token);
    for (const session of this.sessions.values()) if (session.token === token) session.socket?.close(4004, 'Authentication failed.');
  }

  fail(route: string, ...faults: DiscordFault[]): void {
    this.faults.set(route, [...(this.faults.get(route) ?? []), ...faults]);
  }

  /** Cuts the bot's connection as a network drop would: no close frame; the session stays resumable. */
  drop(): void {
    for (const session of this.sessions.values()) session.socket?.terminate();
  }

  /** Asks the bot to reconnect and resume (op 7), as Discord does now and then. */
  askReconnect(): void {
    for (const session of this.sessions.values()) session.socket?.send(JSON.stringify({ op: 7, d: null }));
  }

  get connectedNow(): boolean {
    return [...this.sessions.values()].some((session) => session.socket?.readyState === 1 && session.identified);
  }

  /** A message a person writes: in a DM with the bot (no guild) or in a guild channel. Sent to the bot's session, or kept for it to resume. */
  message(fields: { author: DiscordUser; channel: string; content: string; guild?: boolean; mentionsBot?: boolean; replyTo?: { id: string; author: DiscordUser }; attachments?: DiscordAttachment[]; flags?: number }): { id: string } {
    const message = {
      id: nextId(), channel_id: fields.channel, ...(fields.guild ? { guild_id: this.guildId } : {}),
      author: fields.author, content: fields.content, timestamp: new Date().toISOString(), type: fields.replyTo ? 19 : 0,
      mentions: fields.mentionsBot ? [this.bot] : [], mention_roles: [], attachments: fields.attachments ?? [], embeds: [], pinned: false, tts: false, mention_everyone: false, flags: fields.flags ?? 0,
      ...(fields.replyTo ? { message_reference: { message_id: fields.replyTo.id, channel_id: fields.channel }, referenced_message: { id: fields.replyTo.id, author: fields.replyTo.author, content: '' } } : {}),
    };
    this.dispatch('MESSAGE_CREATE', message);
    return message;
  }

  /**
   * A person presses a button under one of the bot's messages: an
   * INTERACTION_CREATE of a message component, as Discord dispatches it (in a
   * DM the user is `user`, in a guild `member.user`). Its answer comes to
   * POST /interactions/{id}/{token}/callback (interactions() reads them).
   */
  press(fields: { user: DiscordUser; channel: string; messageId: string; customId: string; guild?: boolean }): { id: string; token: string } {
    const id = nextId();
    const token = `itok.${id}`;
    this.dispatch('INTERACTION_CREATE', {
      id, token, type: 3, version: 1, application_id: this.bot.id, channel_id: fields.channel,
      ...(fields.guild ? { guild_id: this.guildId, member: { user: fields.user, roles: [] } } : { user: fields.user }),
      message: { id: fields.messageId, channel_id: fields.channel, author: this.bot, content: '' },
      data: { custom_id: fields.customId, component_type: 2 },
    });
    return { id, token };
  }

  /** The bot's answers to interactions, in order. */
  interactions(id?: string): DiscordCall[] {
    return this.calls.filter((call) => call.method === 'POST' && /^\/interactions\/\d+\/[^/]+\/callback$/.test(call.path) && (id === undefined || call.path.startsWith(`/interactions/${id}/`)));
  }

  /** Any dispatch (malformed ones included), to every session. */
  dispatch(t: string, d: unknown): void {
    for (const session of this.sessions.values()) {
      const event = { s: ++session.seq, t, d };
      session.events.push(event);
      if (session.socket?.readyState === 1 && session.identified) session.socket.send(JSON.stringify({ op: 0, ...event }));
    }
  }

  /** Edits the bot made to its messages in a channel, in order. */
  edited(channel?: string): DiscordCall[] {
    return this.calls.filter((call) => call.method === 'PATCH' && !call.refused && (channel === undefined || call.path.startsWith(`/channels/${channel}/messages/`)));
  }

  /** Messages the bot sent to a channel, in order; with all, the calls Discord refused too. */
  sent(channel?: string, options: { all?: boolean } = {}): DiscordCall[] {
    return this.calls.filter((call) => call.method === 'POST' && /^\/channels\/\d+\/messages$/.test(call.path)
      && (channel === undefined || call.path === `/channels/${channel}/messages`) && (options.all || !call.refused));
  }

  private connected(ws: WebSocket): void {
    let session: Session | undefined;
    let beat: NodeJS.Timeout | undefined;
    ws.send(JSON.stringify({ op: 10, d: { heartbeat_interval: 1500 } }));
    ws.on('close', () => clearTimeout(beat));
    ws.on('message', (data) => {
      let frame: { op: number; d: any };
      try {
        frame = JSON.parse(String(data));
      } catch {
        ws.close(4002, 'Error while decoding payload.');
        return;
      }
      if (frame.op === 1) {
        ws.send(JSON.stringify({ op: 11 }));
        return;
      }
      if (frame.op === 2) {
        if (frame.d?.token !== this.token || this.revoked.has(frame.d?.token)) {
          ws.close(4004, 'Authentication failed.');
          return;
        }
        this.identifies.push(Number(frame.d.intents));
        session = { id: randomUUID().replace(/-/g, ''), token: frame.d.token, seq: 0, events: [], socket: ws, identified: true };
        this.sessions.set(session.id, session);
        const ready = { s: ++session.seq, t: 'READY', d: { v: 10, user: this.bot, session_id: session.id, resume_gateway_url: `ws://127.0.0.1:${this.port}/gateway`, guilds: [{ id: this.guildId, unavailable: true }], application: { id: this.bot.id } } };
        session.events.push(ready);
        ws.send(JSON.stringify({ op: 0, ...ready }));
        return;
      }
      if (frame.op === 6) {
        const resumed = this.sessions.get(String(frame.d?.session_id));
        if (!resumed || frame.d?.token !== resumed.token || this.revoked.has(resumed.token)) {
          ws.send(JSON.stringify({ op: 9, d: false }));
          return;
        }
        this.resumes.push({ sessionId: resumed.id, seq: Number(frame.d.seq) });
        resumed.socket?.terminate();
        resumed.socket = ws;
        resumed.identified = true;
        session = resumed;
        // What the session missed since the sequence the bot names, then RESUMED.
        for (const event of resumed.events.filter((event) => event.s > Number(frame.d.seq))) ws.send(JSON.stringify({ op: 0, ...event }));
        const done = { s: ++resumed.seq, t: 'RESUMED', d: {} };
        resumed.events.push(done);
        ws.send(JSON.stringify({ op: 0, ...done }));
      }
    });
  }

  /** A file a person attaches: served at its CDN address (the stand-in's own), with no token, as Discord's CDN does. */
  attachment(data: Uint8Array, filename: string, contentType?: string): DiscordAttachment {
    const id = nextId();
    this.files.set(id, data);
    const url = `http://127.0.0.1:${this.port}/attachments/${id}/${filename}`;
    return { id, filename, size: data.length, url, proxy_url: url, ...(contentType ? { content_type: contentType } : {}) };
  }

  /** Files the bot attached to messages (multipart, https://discord.com/developers/docs/reference#uploading-files), with their bytes. */
  readonly uploads: { channel: string; message: string; filename: string; contentType: string; data: Uint8Array; content: string }[] = [];
  /** Reactions the bot put: "<channel> <message> <emoji>". */
  readonly reactions: string[] = [];

  private async answer(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks);
    const text = raw.toString('utf8');
    const download = /^\/attachments\/(\d+)\//.exec(req.url ?? '');
    if (download) {
      this.calls.push({ method: 'GET', path: req.url!.split('?')[0]!, token: String(req.headers.authorization ?? ''), body: {}, at: Date.now() });
      const data = this.files.get(download[1]!);
      if (!data) return void res.writeHead(404).end();
      return void res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(data.length) }).end(data);
    }
    const path = (req.url ?? '').replace(/^\/api\/v10/, '').split('?')[0]!;
    let body: Record<string, any> = {};
    const type = String(req.headers['content-type'] ?? '');
    if (type.startsWith('multipart/form-data')) {
      // A message with files: its JSON in payload_json, each file as files[n] (its name, type and bytes).
      const form = await new Response(raw, { headers: { 'content-type': type } }).formData();
      const payload = form.get('payload_json');
      body = typeof payload === 'string' ? JSON.parse(payload) : {};
      body.files = [];
      for (const [name, value] of form.entries()) {
        if (name.startsWith('files[') && typeof value !== 'string') body.files.push({ name: value.name, type: value.type, data: Buffer.from(await value.arrayBuffer()) });
      }
    } else if (text) {
      body = JSON.parse(text);
    }
    const token = String(req.headers.authorization ?? '').replace(/^Bot /, '');
    const call: DiscordCall = { method: req.method ?? 'GET', path, token, body, at: Date.now() };
    this.calls.push(call);
    const send = (status: number, payload: unknown, headers: Record<string, string> = {}) => {
      if (status >= 300) call.refused = true;
      call.response = payload;
      res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(status === 204 ? undefined : JSON.stringify(payload));
    };
    const route = `${call.method} ${path.replace(/\d{17,20}/g, ':id')}`;
    const fault = this.faults.get(route)?.shift();
    if (fault && 'hang' in fault) return;
    if (fault) {
      const retry: Record<string, string> = fault.retryAfter === undefined ? {} : { 'retry-after': String(Math.ceil(fault.retryAfter)), 'x-ratelimit-scope': 'user' };
      return send(fault.status, fault.status === 429
        ? { message: 'You are being rate limited.', retry_after: fault.retryAfter ?? 1, global: false }
        : { message: fault.message ?? '500: Internal Server Error', code: fault.code ?? 0 }, retry);
    }
    // An interaction's answer is authorised by its token, in the path.
    const interaction = /^\/interactions\/(\d+)\/([^/]+)\/callback$/.exec(path);
    if (interaction && call.method === 'POST') return interaction[2] === `itok.${interaction[1]}` ? send(204, undefined) : send(401, { message: 'Invalid interaction token', code: 50027 });
    if (token !== this.token || this.revoked.has(token)) return send(401, { message: '401: Unauthorized', code: 0 });

    if (route === 'GET /gateway/bot') {
      return send(200, { url: `ws://127.0.0.1:${this.port}/gateway`, shards: 1, session_start_limit: { total: 1000, remaining: 999, reset_after: 0, max_concurrency: 1 } });
    }
    if (route === 'POST /users/@me/channels') {
      const recipient = String(body.recipient_id ?? '');
      if (!/^\d{17,20}$/.test(recipient)) return send(400, { message: 'Invalid Form Body', code: 50035 });
      return send(200, { id: this.dmOf({ id: recipient, username: recipient }), type: 1, recipients: [{ id: recipient }] });
    }
    const channelRoute = /^\/channels\/(\d+)\/(messages|typing)$/.exec(path);
    if (channelRoute && call.method === 'POST') {
      const [, channel, what] = channelRoute;
      if (!this.channels.has(channel!)) return send(404, { message: 'Unknown Channel', code: 10003 });
      if (what === 'typing') return send(204, undefined);
      const content = String(body.content ?? '');
      const files = (body.files ?? []) as { name: string; type: string; data: Buffer }[];
      if (!content.trim() && files.length === 0) return send(400, { message: 'Cannot send an empty message', code: 50006 });
      if (files.some((file) => file.data.length > 10 * 1024 * 1024)) return send(413, { message: 'Request entity too large', code: 40005 });
      if (content.length > 2000) return send(400, { message: 'Invalid Form Body', code: 50035, errors: { content: { _errors: [{ code: 'BASE_TYPE_MAX_LENGTH', message: 'Must be 2000 or fewer in length.' }] } } });
      const id = nextId();
      this.posted.set(id, channel!);
      for (const file of files) this.uploads.push({ channel: channel!, message: id, filename: file.name, contentType: file.type, data: new Uint8Array(file.data), content });
      return send(200, { id, channel_id: channel, author: this.bot, content, timestamp: new Date().toISOString(), nonce: body.nonce, ...(body.message_reference ? { message_reference: body.message_reference } : {}) });
    }
    const messageRoute = /^\/channels\/(\d+)\/messages\/(\d+)$/.exec(path);
    if (messageRoute && call.method === 'PATCH') {
      const [, channel, id] = messageRoute;
      if (this.posted.get(id!) !== channel) return send(404, { message: 'Unknown Message', code: 10008 });
      const content = String(body.content ?? '');
      if (content.length > 2000) return send(400, { message: 'Invalid Form Body', code: 50035 });
      return send(200, { id, channel_id: channel, author: this.bot, content, edited_timestamp: new Date().toISOString() });
    }
    const getChannel = /^\/channels\/(\d+)$/.exec(path);
    if (getChannel && call.method === 'GET') {
      const [, id] = getChannel;
      if (!this.channels.has(id!)) return send(404, { message: 'Unknown Channel', code: 10003 });
      const parent = this.threads.get(id!);
      const dm = [...this.dms.values()].includes(id!);
      return send(200, { id, type: parent ? 11 : dm ? 1 : 0, ...(parent ? { parent_id: parent, guild_id: this.guildId, thread_metadata: { archived: false } } : dm ? {} : { guild_id: this.guildId }) });
    }
    const reactionRoute = /^\/channels\/(\d+)\/messages\/(\d+)\/reactions\/([^/]+)\/@me$/.exec(path);
    if (reactionRoute && call.method === 'PUT') {
      const [, channel, message, emoji] = reactionRoute;
      if (!this.channels.has(channel!)) return send(404, { message: 'Unknown Channel', code: 10003 });
      this.reactions.push(`${channel} ${message} ${decodeURIComponent(emoji!)}`);
      return send(204, undefined);
    }
    return send(404, { message: '404: Not Found', code: 0 });
  }
}
