/**
 * A stand-in for the Telegram Bot API (https://core.telegram.org/bots/api),
 * for what cannot run here: the methods a bot uses to poll for updates and to
 * answer, with the API's own answers for what goes wrong (401 Unauthorized
 * for a bad token, 429 with retry_after, 400 "chat not found" and "can't
 * parse entities", 409 when two pollers compete). Tests push users'
 * messages in as updates and read back every request the bot made; faults
 * (a 429, a 5xx, a hang, a connection cut mid-answer) are scripted per
 * method. Buttons: a press of an inline keyboard's button comes as a
 * callback_query update, answered with answerCallbackQuery.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';

export interface TgUser { id: number; is_bot?: boolean; first_name: string; last_name?: string; username?: string }
export interface TgChat { id: number; type: 'private' | 'group' | 'supergroup' | 'channel'; title?: string; username?: string; first_name?: string }
export interface TgMessage {
  message_id: number;
  date: number;
  chat: TgChat;
  from?: TgUser;
  text?: string;
  caption?: string;
  entities?: { type: string; offset: number; length: number; user?: TgUser }[];
  reply_to_message?: TgMessage;
}
export interface TgUpdate { update_id: number; message?: TgMessage; [field: string]: unknown }

export interface TgRequest { token: string; method: string; body: Record<string, any>; at: number; /** The result the stand-in answered with, when it took the call. */ result?: any }

export type Fault =
  | { status: number; description: string; retryAfter?: number }
  | { hang: true }
  | { cut: true };

interface Bot {
  user: TgUser; token: string; pending: TgUpdate[]; confirmed: number; poll?: { respond: (status: number, body: unknown) => void };
  /** Webhook mode: where updates are posted, with the secret; deliveries in flight. */
  webhook?: { url: string; secret?: string };
  posting?: boolean;
}

/** What Telegram's webhook posts got back: each try, its status (0: no answer). */
export interface WebhookTry { updateId: number; status: number; at: number }

/** Some of the emoji Telegram takes as reactions (its ReactionTypeEmoji list). */
const REACTION_EMOJI = new Set(['👍', '👎', '❤', '🔥', '🎉', '👀', '🙏', '👌', '🤔', '😁']);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Text as Telegram counts it after parsing HTML: tags gone, entities one character. */
function visibleLength(html: string): number {
  return html.replace(/<[^>]*>/g, '').replace(/&(lt|gt|amp|quot|#\d+|#x[0-9a-f]+);/gi, '_').length;
}

/** The HTML Telegram accepts: its tags only, each closed, nested properly; & < > escaped. */
function htmlProblem(html: string): string | undefined {
  const allowed = new Set(['b', 'strong', 'i', 'em', 'u', 'ins', 's', 'strike', 'del', 'span', 'tg-spoiler', 'a', 'code', 'pre', 'blockquote', 'tg-emoji']);
  const open: string[] = [];
  for (const match of html.matchAll(/<(\/?)([a-z-]+)([^>]*)>|<|&(?!(lt|gt|amp|quot|#\d+|#x[0-9a-f]+);)/gi)) {
    if (match[0] === '<') return `Unsupported start tag at byte offset ${match.index}`;
    if (match[0] === '&') return `Character entity expected at byte offset ${match.index}`;
    const [, closing, tag] = match;
    if (!allowed.has(tag!.toLowerCase())) return `Unsupported start tag "${tag}" at byte offset ${match.index}`;
    if (closing) {
      if (open.pop() !== tag!.toLowerCase()) return `Unmatched end tag at byte offset ${match.index}, expected "</${open.at(-1) ?? ''}>", found "</${tag}>"`;
    } else {
      open.push(tag!.toLowerCase());
    }
  }
  return open.length ? `Can't find end tag corresponding to start tag "${open.at(-1)}"` : undefined;
}

export class TelegramApi {
  readonly requests: TgRequest[] = [];
  readonly webhookTries: WebhookTry[] = [];
  /** The secret sent with webhook posts, when set; tests change it to play an impostor. */
  webhookSecretOverride?: string;
  private readonly bots = new Map<string, Bot>();
  private readonly faults = new Map<string, Fault[]>();
  private readonly chats = new Map<number, TgChat>();
  private readonly messageIds = new Map<number, number>();
  private nextUpdateId = 100_000;
  private readonly files = new Map<string, { path: string; data: Uint8Array }>();
  private server?: Server;
  private readonly sockets = new Set<import('node:net').Socket>();
  port = 0;

  get apiRoot(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Listens on a free port, or on `port` (the same API back after stop, with its bots and chats). */
  async start(port = 0): Promise<this> {
    this.server = createServer((req, res) => void this.answer(req, res));
    this.server.on('connection', (socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
    await new Promise<void>((resolve) => this.server!.listen(port, '127.0.0.1', resolve));
    this.port = (this.server.address() as { port: number }).port;
    return this;
  }

  async stop(): Promise<void> {
    for (const bot of this.bots.values()) bot.poll?.respond(200, { ok: true, result: [] });
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server?.close(() => resolve()) ?? resolve());
  }

  /** A bot the API knows, by its token ("<id>:<secret>"). */
  addBot(token: string, username: string): TgUser {
    const user = { id: Number(token.split(':')[0]), is_bot: true, first_name: username, username };
    this.bots.set(token, { user, token, pending: [], confirmed: 0 });
    return user;
  }

  /** Revokes a token: every call with it is refused from now on, as after /revoke in BotFather. */
  revoke(token: string): void {
    const bot = this.bots.get(token);
    bot?.poll?.respond(401, { ok: false, error_code: 401, description: 'Unauthorized' });
    this.bots.delete(token);
  }

  /** The next calls of a method fail this way, one fault per call. */
  fail(method: string, ...faults: Fault[]): void {
    this.faults.set(method, [...(this.faults.get(method) ?? []), ...faults]);
  }

  /** A chat the bot is in (a group it was added to, a person who started it), known before anyone writes there. */
  openChat(chat: TgChat): void {
    this.chats.set(chat.id, chat);
  }

  /** A message a user sends the bot (or a group it is in); returns its update. */
  message(token: string, message: Omit<TgMessage, 'message_id' | 'date'> & { date?: number; [field: string]: unknown }): TgUpdate {
    this.chats.set(message.chat.id, message.chat);
    const full: TgMessage = { message_id: this.nextMessageId(message.chat.id), date: Math.floor(Date.now() / 1000), ...message };
    return this.update(token, { message: full });
  }

  /**
   * A user presses a button of an inline keyboard under one of the bot's
   * messages: a callback_query update, as Telegram sends it, with the
   * button's callback_data. Returns the query's id (answerCallbackQuery names it).
   */
  press(token: string, fields: { from: TgUser; chat: TgChat; messageId: number; data: string; text?: string }): string {
    this.chats.set(fields.chat.id, fields.chat);
    const bot = this.bots.get(token)!;
    const id = `cbq${++this.nextUpdateId}`;
    this.update(token, {
      callback_query: {
        id, from: fields.from, chat_instance: `ci${fields.chat.id}`, data: fields.data,
        message: { message_id: fields.messageId, date: Math.floor(Date.now() / 1000), chat: fields.chat, from: bot.user, text: fields.text ?? '' },
      },
    });
    return id;
  }

  /** The bot's answers to callback queries (answerCallbackQuery), by query id. */
  answers(queryId?: string): TgRequest[] {
    return this.requests.filter((request) => request.method === 'answerCallbackQuery' && (queryId === undefined || request.body.callback_query_id === queryId));
  }

  /** Any update, as Telegram would send it (malformed ones included). */
  update(token: string, fields: Record<string, unknown>): TgUpdate {
    const bot = this.bots.get(token)!;
    const update = { update_id: ++this.nextUpdateId, ...fields } as TgUpdate;
    bot.pending.push(update);
    if (bot.webhook) void this.post(bot);
    else this.flush(bot);
    return update;
  }

  /**
   * Webhook mode, as Telegram does it: the oldest pending update is posted
   * with the secret token header until the bot answers 2xx, then the next;
   * a failure is tried again after a pause.
   */
  private async post(bot: Bot): Promise<void> {
    if (bot.posting) return;
    bot.posting = true;
    try {
      while (bot.webhook && bot.pending.length > 0 && this.server?.listening) {
        const update = bot.pending[0]!;
        let status = 0;
        try {
          const secret = this.webhookSecretOverride ?? bot.webhook.secret;
          const response = await fetch(bot.webhook.url, {
            method: 'POST', body: JSON.stringify(update),
            headers: { 'content-type': 'application/json', ...(secret ? { 'x-telegram-bot-api-secret-token': secret } : {}) },
            signal: AbortSignal.timeout(10_000),
          });
          status = response.status;
          await response.arrayBuffer();
        } catch {
          status = 0;
        }
        this.webhookTries.push({ updateId: update.update_id, status, at: Date.now() });
        if (status >= 200 && status < 300) bot.pending.shift();
        else await sleep(300);
      }
    } finally {
      bot.posting = false;
    }
  }

  /** A file users can send (its file_id goes in a message's photo or document); fetched with getFile, then its file address. */
  addFile(data: Uint8Array, path = `documents/file_${this.files.size}`): { file_id: string; file_unique_id: string; file_size: number } {
    const id = `FILE${this.files.size}x${Math.random().toString(36).slice(2, 10)}`;
    this.files.set(id, { path, data });
    return { file_id: id, file_unique_id: `U${id}`, file_size: data.length };
  }

  /** Updates given out but not yet confirmed (by a later getUpdates with a higher offset). */
  unconfirmed(token: string): TgUpdate[] {
    return [...(this.bots.get(token)?.pending ?? [])];
  }

  /** What the bot sent, in order: sendMessage calls (and, with edits, editMessageText). */
  sent(chatId?: number, methods = ['sendMessage']): TgRequest[] {
    return this.requests.filter((request) => methods.includes(request.method) && (chatId === undefined || Number(request.body.chat_id) === chatId));
  }

  private nextMessageId(chatId: number): number {
    const next = (this.messageIds.get(chatId) ?? 0) + 1;
    this.messageIds.set(chatId, next);
    return next;
  }

  private flush(bot: Bot): void {
    if (!bot.poll || bot.pending.length === 0) return;
    const poll = bot.poll;
    bot.poll = undefined;
    poll.respond(200, { ok: true, result: bot.pending.slice(0, 100) });
  }

  /** Files the bot sent (sendDocument, sendPhoto), with their bytes as received. */
  readonly uploads: { method: string; chatId: number; threadId?: number; caption?: string; name: string; type: string; data: Uint8Array }[] = [];

  private async answer(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks);
    const text = raw.toString('utf8');
    let form: FormData | undefined;
    const download = /^\/file\/bot([^/]+)\/(.+)$/.exec((req.url ?? '').split('?')[0]!);
    if (download) {
      this.requests.push({ token: download[1]!, method: 'file', body: { path: download[2] }, at: Date.now() });
      const file = this.bots.has(download[1]!) ? [...this.files.values()].find((entry) => entry.path === download[2]) : undefined;
      if (!file) return void res.writeHead(404).end('Not Found');
      return void res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(file.data.length) }).end(file.data);
    }
    const match = /^\/bot([^/]+)\/([A-Za-z]+)$/.exec((req.url ?? '').split('?')[0]!);
    const send = (status: number, body: unknown) => {
      if (res.writableEnded || res.destroyed) return;
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    };
    if (!match) return send(404, { ok: false, error_code: 404, description: 'Not Found' });
    const [, token, method] = match as unknown as [string, string, string];
    let body: Record<string, any> = {};
    const type = req.headers['content-type'] ?? '';
    if (type.includes('json') && text) body = JSON.parse(text);
    else if (type.includes('urlencoded')) body = Object.fromEntries(new URLSearchParams(text));
    else if (type.includes('multipart/form-data')) {
      // A file upload (sendVoice, sendDocument, sendPhoto: https://core.telegram.org/bots/api#sending-files): its fields, each file as its name, type and bytes.
      form = await new Response(raw, { headers: { 'content-type': type } }).formData();
      for (const [name, value] of form.entries()) {
        body[name] = typeof value === 'string' ? value : { name: value.name, type: value.type, data: Buffer.from(await value.arrayBuffer()) };
      }
      // A field naming an uploaded part ("attach://<part>") is that part, as the Bot API reads it.
      for (const [name, value] of Object.entries(body)) {
        if (typeof value === 'string' && value.startsWith('attach://')) body[name] = body[value.slice('attach://'.length)];
      }
    }
    else if (req.url?.includes('?')) body = Object.fromEntries(new URLSearchParams(req.url.split('?')[1]));
    const request: TgRequest = { token, method, body, at: Date.now() };
    this.requests.push(request);

    const fault = this.faults.get(method)?.shift();
    if (fault && 'hang' in fault) return;
    if (fault && 'cut' in fault) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"ok":true,"result":{"message_');
      res.socket?.destroy();
      return;
    }
    if (fault) {
      return send(fault.status, { ok: false, error_code: fault.status, description: fault.description, ...(fault.retryAfter !== undefined ? { parameters: { retry_after: fault.retryAfter } } : {}) });
    }
    const bot = this.bots.get(token);
    if (!bot) return send(401, { ok: false, error_code: 401, description: 'Unauthorized' });
    const ok = (result: unknown) => {
      request.result = result;
      send(200, { ok: true, result });
    };
    const bad = (description: string, status = 400) => send(status, { ok: false, error_code: status, description });

    switch (method) {
      case 'getMe': return ok(bot.user);
      case 'setMyCommands': return ok(true);
      case 'deleteWebhook':
        bot.webhook = undefined;
        if (body.drop_pending_updates === true || body.drop_pending_updates === 'true') bot.pending = [];
        return ok(true);
      case 'setWebhook': {
        const url = String(body.url ?? '');
        if (!url) return bad('Bad Request: bad webhook: An HTTPS URL must be provided for webhook');
        bot.webhook = { url, ...(body.secret_token ? { secret: String(body.secret_token) } : {}) };
        bot.poll?.respond(409, { ok: false, error_code: 409, description: 'Conflict: terminated by setWebhook request' });
        bot.poll = undefined;
        void this.post(bot);
        return ok(true);
      }
      case 'getWebhookInfo': return ok({ url: bot.webhook?.url ?? '', has_custom_certificate: false, pending_update_count: bot.pending.length });
      case 'getUpdates': {
        if (bot.webhook) return send(409, { ok: false, error_code: 409, description: "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first" });
        const offset = body.offset === undefined ? undefined : Number(body.offset);
        // Updates below the offset are confirmed: Telegram forgets them.
        if (offset !== undefined) bot.pending = bot.pending.filter((update) => update.update_id >= offset);
        // A second poller ends the first with 409, as Telegram does.
        bot.poll?.respond(409, { ok: false, error_code: 409, description: 'Conflict: terminated by other getUpdates request; make sure that only one bot instance is running' });
        bot.poll = undefined;
        if (bot.pending.length > 0) return ok(bot.pending.slice(0, Number(body.limit ?? 100)));
        const timeout = Number(body.timeout ?? 0);
        if (timeout <= 0) return ok([]);
        // The poll ends with the first update, a competing poll, the client going away, or its timeout.
        let wake!: () => void;
        const woke = new Promise<void>((resolve) => { wake = resolve; });
        const poll = { respond: (status: number, answer: unknown) => { send(status, answer); wake(); } };
        bot.poll = poll;
        const closed = () => { if (bot.poll === poll) bot.poll = undefined; wake(); };
        req.socket.once('close', closed);
        const timer = setTimeout(wake, timeout * 1000);
        await woke;
        clearTimeout(timer);
        req.socket.off('close', closed);
        if (bot.poll === poll) {
          bot.poll = undefined;
          ok([]);
        }
        return;
      }
      case 'getFile': {
        const file = this.files.get(String(body.file_id));
        if (!file) return bad('Bad Request: invalid file_id');
        // The Bot API hands out files up to 20 MB.
        if (file.data.length > 20 * 1024 * 1024) return bad('Bad Request: file is too big');
        return ok({ file_id: body.file_id, file_unique_id: `U${String(body.file_id)}`, file_size: file.data.length, file_path: file.path });
      }
      case 'sendChatAction': return this.chats.has(Number(body.chat_id)) ? ok(true) : bad('Bad Request: chat not found');
      case 'answerCallbackQuery': return String(body.callback_query_id ?? '').startsWith('cbq') ? ok(true) : bad('Bad Request: query is too old and response timeout expired or query ID is invalid');
      case 'sendMessage': case 'editMessageText': {
        const chat = this.chats.get(Number(body.chat_id));
        if (!chat) return bad('Bad Request: chat not found');
        const content = String(body.text ?? '');
        if (!content.trim()) return bad('Bad Request: message text is empty');
        if (body.parse_mode === 'HTML') {
          const problem = htmlProblem(content);
          if (problem) return bad(`Bad Request: can't parse entities: ${problem}`);
        }
        if ((body.parse_mode === 'HTML' ? visibleLength(content) : content.length) > 4096) return bad('Bad Request: message is too long');
        const messageId = method === 'editMessageText' ? Number(body.message_id) : this.nextMessageId(chat.id);
        return ok({ message_id: messageId, date: Math.floor(Date.now() / 1000), chat, from: bot.user, text: content, ...(method === 'editMessageText' ? { edit_date: Math.floor(Date.now() / 1000) } : {}) });
      }
      case 'sendVoice': {
        const chat = this.chats.get(Number(body.chat_id));
        if (!chat) return bad('Bad Request: chat not found');
        const voice = body.voice as { data?: Buffer } | undefined;
        if (!voice?.data?.length) return bad('Bad Request: there is no voice in the request');
        const stored = this.addFile(voice.data, `voice/file_${this.files.size}.oga`);
        return ok({ message_id: this.nextMessageId(chat.id), date: Math.floor(Date.now() / 1000), chat, from: bot.user, voice: { ...stored, duration: 1, mime_type: 'audio/ogg' } });
      }
      case 'setMessageReaction': {
        // https://core.telegram.org/bots/api#setmessagereaction: a message of a chat the bot is in, emoji from Telegram's list.
        if (!this.chats.has(Number(body.chat_id))) return bad('Bad Request: chat not found');
        if (!Number.isInteger(Number(body.message_id)) || Number(body.message_id) > (this.messageIds.get(Number(body.chat_id)) ?? 0)) return bad('Bad Request: message to react not found');
        const reaction = typeof body.reaction === 'string' ? JSON.parse(body.reaction) : body.reaction;
        if (!Array.isArray(reaction) || reaction.some((entry: any) => entry?.type !== 'emoji' || !REACTION_EMOJI.has(entry.emoji))) return bad('Bad Request: REACTION_INVALID');
        return ok(true);
      }
      case 'sendDocument': case 'sendPhoto': {
        const chat = this.chats.get(Number(body.chat_id));
        if (!chat) return bad('Bad Request: chat not found');
        const field = method === 'sendPhoto' ? 'photo' : 'document';
        // A file may come under its own field, or under another one its field names (attach://<name>).
        const named = form?.get(field);
        const file = typeof named === 'string' && named.startsWith('attach://') ? form?.get(named.slice('attach://'.length)) : named;
        if (!file || typeof file === 'string') return bad(`Bad Request: there is no ${field} in the request`);
        // Bots upload photos up to 10 MB and other files up to 50 MB.
        if (file.size > (method === 'sendPhoto' ? 10 : 50) * 1024 * 1024) return bad('Request Entity Too Large', 413);
        if (String(body.caption ?? '').length > 1024) return bad('Bad Request: message caption is too long');
        const data = new Uint8Array(await file.arrayBuffer());
        this.uploads.push({
          method, chatId: chat.id, name: file.name, type: file.type, data,
          ...(body.message_thread_id ? { threadId: Number(body.message_thread_id) } : {}), ...(body.caption ? { caption: String(body.caption) } : {}),
        });
        const messageId = this.nextMessageId(chat.id);
        return ok({ message_id: messageId, date: Math.floor(Date.now() / 1000), chat, from: bot.user, ...(body.caption ? { caption: body.caption } : {}) });
      }
      default: return bad(`Not Found: method not found`, 404);
    }
  }
}
