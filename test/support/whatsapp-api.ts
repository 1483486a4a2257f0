/**
 * A stand-in for Meta's WhatsApp Cloud API (developers.facebook.com/docs/whatsapp/cloud-api),
 * for what cannot run here, written from its public reference:
 *
 * - the Graph API: a phone number's profile (GET /<version>/<phone number
 *   id>), the messages endpoint (POST /<version>/<phone number id>/messages:
 *   text, media by link, reactions, templates, read receipts with the typing
 *   indicator, interactive messages: reply buttons and lists, their shape
 *   checked as Meta checks it (interactive.ts below)), a media object's address (GET /<version>/<media id>) and its
 *   bytes there, each with the access token, and Meta's error bodies
 *   ({error: {message, type, code, error_data, fbtrace_id}}) for what goes
 *   wrong (190 for a bad token, 100 for a bad parameter, 130429 with a 429,
 *   132001 for an unknown template);
 * - the webhook, as Meta posts it: notifications (object
 *   whatsapp_business_account, entry, changes, value with metadata, contacts,
 *   messages or statuses) signed with the app secret (X-Hub-Signature-256:
 *   sha256=<HMAC-SHA256 of the body>), non-ASCII escaped as \uXXXX as Meta
 *   does, posted one after another and again until the callback answers 200;
 *   statuses (sent, delivered) of what the business sent, and `failed` with
 *   131047 for a free-form message to someone who has not written in the
 *   last 24 hours, which Meta takes (200) and then does not deliver;
 * - the subscription handshake (GET with hub.mode, hub.verify_token,
 *   hub.challenge);
 * - a person's press of a reply button or a list row: a message of type
 *   interactive (button_reply {id, title}, list_reply {id, title,
 *   description}) with the context of the message it was under.
 *
 * Every API call is kept for the tests to read; faults (an error status with
 * Meta's code, a connection cut) are scripted per endpoint.
 */
import { createHash, createHmac, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';

export interface WaCall {
  method: string; path: string; token: string; body: Record<string, any>; at: number; status: number;
  /** What Meta answered (JSON calls). */
  answer?: any;
  /** Meta answered with an error (a scripted fault, or its refusal). */
  refused?: boolean;
}
/** A scripted fault: an error answer with Meta's code (and a Retry-After), or a connection cut before any answer. */
export type WaFault = { status: number; code?: number; message?: string; retryAfter?: number } | { cut: true };
/** Where a fault strikes: messages sent, read receipts, the phone number's profile, media addresses, media bytes. */
export type WaEndpoint = 'messages' | 'read' | 'phone' | 'media' | 'download';
/** What a person sends: text, or a file (image, document, audio, voice note, video, sticker) with a caption. */
export type WaContent =
  | { text: string }
  | { image: MediaRef; caption?: string }
  | { document: MediaRef; caption?: string; filename?: string }
  | { audio: MediaRef; voice?: boolean }
  | { raw: Record<string, unknown> };
interface MediaRef { id: string; mime_type: string; sha256: string }
/** One post of a notification to the callback: its status (0: no answer). */
export interface WaDelivery { id: string; status: number; at: number }

const WINDOW_MS = 24 * 60 * 60_000;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** Meta escapes every non-ASCII character in what it posts; the signature is over those bytes. */
const asMetaSends = (value: unknown) => JSON.stringify(value).replace(/[\u007f-\uffff]/g, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`);
const wamid = () => `wamid.HBgL${randomBytes(24).toString('base64')}`;

export class WhatsAppApi {
  readonly phoneNumberId = '106540352242922';
  readonly displayNumber = '+1 555-010-0199';
  readonly verifiedName = 'Gateway Test';
  readonly accessToken = 'EAAGstandInAccessToken0123456789abcdefZZ';
  readonly appSecret = 'standin-app-secret-5f1c2d9e8a7b';
  readonly wabaId = '102290129340398';
  /** Further business numbers of the same app: phone number id -> display number. */
  readonly numbers = new Map<string, string>();
  /** Approved templates, by name. */
  readonly templates = new Set(['welcome_back']);
  readonly calls: WaCall[] = [];
  readonly deliveries: WaDelivery[] = [];
  /** Where notifications are posted (the callback URL given in the app's settings). */
  callbackUrl?: string;
  /** The app secret notifications are signed with; tests change it to play an impostor. */
  signingSecret = this.appSecret;
  /** Between two tries of a notification the callback refused. */
  retryMs = 300;
  private readonly faults = new Map<WaEndpoint, WaFault[]>();
  private readonly media = new Map<string, { data: Uint8Array; mime: string }>();
  /** When each person last wrote to the business (their 24-hour window). */
  private readonly heard = new Map<string, number>();
  private readonly queue: { id: string; body: string }[] = [];
  /** Every notification queued, by its id. */
  private readonly posted = new Map<string, string>();
  private posting = false;
  private revoked = false;
  /** An outage: every API call's connection is cut (notifications are still posted). */
  down = false;
  private server?: Server;
  port = 0;

  get apiRoot(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Listens on a free port, or on `port` (the same API back after stop, with what it knew). */
  async start(port = 0): Promise<this> {
    this.server = createServer((req, res) => void this.answer(req, res));
    await new Promise<void>((resolve) => this.server!.listen(port, '127.0.0.1', resolve));
    this.port = (this.server.address() as { port: number }).port;
    void this.post();
    return this;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => this.server?.close(() => resolve()) ?? resolve());
  }

  fail(endpoint: WaEndpoint, ...faults: WaFault[]): void {
    this.faults.set(endpoint, [...(this.faults.get(endpoint) ?? []), ...faults]);
  }

  /** The access token stops working (expired, or the system user removed). */
  revoke(): void {
    this.revoked = true;
  }

  /** A media object by its id (one the business uploaded, say): its bytes and type. */
  mediaOf(id: string): { data: Uint8Array; mime: string } | undefined {
    return this.media.get(id);
  }

  /** A file a person can send: its media id, fetched by the business through the Graph API. */
  upload(data: Uint8Array, mime: string): MediaRef {
    const id = String(1_000_000_000_000 + this.media.size);
    this.media.set(id, { data, mime });
    return { id, mime_type: mime, sha256: createHash('sha256').update(data).digest('base64') };
  }

  /**
   * A person writes to the business: the notification Meta posts (with their
   * profile name), queued for the callback. `at` dates it (a notification
   * Meta posts late keeps the time it was sent). Its message id.
   */
  message(from: string, content: WaContent, options: { name?: string; at?: number; phoneNumberId?: string } = {}): string {
    const id = wamid();
    const at = options.at ?? Date.now();
    const type = 'text' in content ? 'text' : 'image' in content ? 'image' : 'document' in content ? 'document' : 'audio' in content ? 'audio' : String(content.raw.type);
    let body: Record<string, unknown>;
    if ('text' in content) body = { text: { body: content.text } };
    else if ('image' in content) body = { image: { ...content.image, ...(content.caption !== undefined ? { caption: content.caption } : {}) } };
    else if ('document' in content) body = { document: { ...content.document, ...(content.caption !== undefined ? { caption: content.caption } : {}), ...(content.filename ? { filename: content.filename } : {}) } };
    else if ('audio' in content) body = { audio: { ...content.audio, ...(content.voice ? { voice: true } : {}) } };
    else body = content.raw;
    const message = { from, id, timestamp: String(Math.floor(at / 1000)), type, ...body };
    if (type !== 'reaction') this.heard.set(from, Math.max(this.heard.get(from) ?? 0, at));
    this.notify({
      messaging_product: 'whatsapp', metadata: this.metadata(options.phoneNumberId),
      contacts: [{ profile: { name: options.name ?? `Person ${from.slice(-4)}` }, wa_id: from }], messages: [message],
    }, id);
    return id;
  }

  /** A notification of any value (statuses, malformed ones), queued for the callback. */
  notify(value: Record<string, unknown>, id = `n${this.deliveries.length}-${randomBytes(4).toString('hex')}`): void {
    const body = asMetaSends(this.envelope(value));
    this.posted.set(id, body);
    this.queue.push({ id, body });
    void this.post();
  }

  /** Meta posts a notification again (it thinks it was not taken): the same bytes, under the same id. */
  again(id: string): void {
    const body = this.posted.get(id);
    if (body === undefined) throw new Error(`no notification ${id}`);
    this.queue.push({ id, body });
    void this.post();
  }

  /** The envelope Meta posts a change's value in. */
  envelope(value: Record<string, unknown>): Record<string, unknown> {
    return { object: 'whatsapp_business_account', entry: [{ id: this.wabaId, changes: [{ value, field: 'messages' }] }] };
  }

  metadata(phoneNumberId = this.phoneNumberId): Record<string, string> {
    return { display_phone_number: (this.numbers.get(phoneNumberId) ?? this.displayNumber).replace(/[^\d]/g, ''), phone_number_id: phoneNumberId };
  }

  /** Resolves once every notification queued so far has been taken (answered 200). */
  async settled(timeoutMs = 20_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.queue.length > 0) {
      if (Date.now() > deadline) throw new Error(`${this.queue.length} notification(s) not taken`);
      await sleep(20);
    }
  }

  /** Whether a notification (by its message id) was answered 200. */
  taken(id: string): boolean {
    return this.deliveries.some((delivery) => delivery.id === id && delivery.status === 200);
  }

  /**
   * Posts a body to a callback as Meta would, signed with `secret` (the app
   * secret unless given; null: no signature), once; its status and body.
   */
  async postSigned(url: string, body: string, options: { secret?: string | null; contentType?: string } = {}): Promise<{ status: number; body: any }> {
    const secret = options.secret === undefined ? this.signingSecret : options.secret;
    const response = await fetch(url, {
      method: 'POST', body,
      headers: {
        'content-type': options.contentType ?? 'application/json',
        ...(secret !== null ? { 'x-hub-signature-256': `sha256=${createHmac('sha256', secret).update(body).digest('hex')}` } : {}),
      },
    });
    const text = await response.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // not JSON
    }
    return { status: response.status, body: parsed };
  }

  /** The subscription handshake Meta makes when the callback URL is saved: its status and body. */
  async verify(url: string, verifyToken: string, challenge = String(1_000_000_000 + Math.floor(Math.random() * 1_000_000_000))): Promise<{ status: number; body: string; challenge: string }> {
    const address = new URL(url);
    address.searchParams.set('hub.mode', 'subscribe');
    address.searchParams.set('hub.challenge', challenge);
    address.searchParams.set('hub.verify_token', verifyToken);
    const response = await fetch(address);
    return { status: response.status, body: await response.text(), challenge };
  }

  /** Messages the business sent (to someone), in order: not read receipts; with all, those refused too. */
  sent(to?: string, options: { all?: boolean } = {}): WaCall[] {
    return this.calls.filter((call) => call.method === 'POST' && call.path.endsWith('/messages') && call.body.status === undefined
      && (to === undefined || call.body.to === to) && (options.all || !call.refused));
  }

  /** The texts the business sent to someone, in order. */
  texts(to: string): string[] {
    return this.sent(to).filter((call) => call.body.type === 'text').map((call) => String(call.body.text?.body));
  }

  /** The interactive messages the business sent to someone (reply buttons, lists), in order. */
  interactives(to: string): WaCall[] {
    return this.sent(to).filter((call) => call.body.type === 'interactive');
  }

  /**
   * A person presses a reply button (or picks a list row) of an interactive
   * message the business sent them, by its title: the notification Meta
   * posts. Its message id.
   */
  press(from: string, sent: WaCall, title: string, options: { name?: string } = {}): string {
    const interactive = sent.body.interactive;
    const under = { from: this.metadata().display_phone_number, id: String(sent.answer.messages.at(-1).id) };
    if (interactive.type === 'button') {
      const button = (interactive.action.buttons as any[]).find((candidate) => candidate.reply.title === title);
      if (!button) throw new Error(`no button ${title}`);
      return this.message(from, { raw: { type: 'interactive', context: under, interactive: { type: 'button_reply', button_reply: { id: button.reply.id, title } } } }, options);
    }
    const row = (interactive.action.sections as any[]).flatMap((section) => section.rows).find((candidate) => candidate.title === title);
    if (!row) throw new Error(`no row ${title}`);
    return this.message(from, { raw: { type: 'interactive', context: under, interactive: { type: 'list_reply', list_reply: { id: row.id, title, ...(row.description ? { description: row.description } : {}) } } } }, options);
  }

  /** Read receipts (with or without the typing indicator) the business sent. */
  receipts(): WaCall[] {
    return this.calls.filter((call) => call.method === 'POST' && call.path.endsWith('/messages') && call.body.status === 'read');
  }

  /**
   * Meta's way: notifications posted one after another, each until the
   * callback answers 200, with a pause after a refusal or no answer.
   */
  private async post(): Promise<void> {
    if (this.posting) return;
    this.posting = true;
    try {
      while (this.queue.length > 0 && this.callbackUrl && this.server?.listening) {
        const next = this.queue[0]!;
        let status = 0;
        try {
          const response = await fetch(this.callbackUrl, {
            method: 'POST', body: next.body,
            headers: { 'content-type': 'application/json', 'x-hub-signature-256': `sha256=${createHmac('sha256', this.signingSecret).update(next.body).digest('hex')}` },
            signal: AbortSignal.timeout(20_000),
          });
          status = response.status;
          await response.arrayBuffer();
        } catch {
          status = 0;
        }
        this.deliveries.push({ id: next.id, status, at: Date.now() });
        if (status === 200) this.queue.shift();
        else await sleep(this.retryMs);
      }
    } finally {
      this.posting = false;
    }
  }

  /** Where notifications go from now on; what waits is posted there. */
  subscribe(url: string): void {
    this.callbackUrl = url;
    void this.post();
  }

  private async answer(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    const url = new URL(req.url ?? '/', this.apiRoot);
    const token = String(req.headers.authorization ?? '').replace(/^Bearer /, '');
    let body: Record<string, any> = {};
    const contentType = String(req.headers['content-type'] ?? '');
    if (contentType.startsWith('multipart/form-data')) {
      // A media upload: its fields, the file as its name, type and bytes.
      const form = await new Response(Buffer.concat(chunks), { headers: { 'content-type': contentType } }).formData();
      for (const [name, value] of form.entries()) body[name] = typeof value === 'string' ? value : { name: value.name, type: value.type, data: Buffer.from(await value.arrayBuffer()) };
    } else {
      try {
        body = text ? JSON.parse(text) : {};
      } catch {
        body = { unparsed: text };
      }
    }
    const call: WaCall = { method: req.method ?? 'GET', path: url.pathname, token, body, at: Date.now(), status: 0 };
    this.calls.push(call);
    const send = (status: number, payload: unknown, headers: Record<string, string> = {}) => {
      call.status = status;
      call.answer = payload;
      if (status !== 200) call.refused = true;
      res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(payload));
    };
    const error = (status: number, code: number, message: string, details?: string, headers: Record<string, string> = {}) => send(status, {
      error: { message, type: code === 190 ? 'OAuthException' : 'OAuthException', code, ...(details ? { error_data: { messaging_product: 'whatsapp', details } } : {}), fbtrace_id: `A${randomBytes(8).toString('hex')}` },
    }, headers);

    const download = /^\/lookaside\/(\d+)$/.exec(url.pathname);
    const graph = /^\/(v\d+\.\d+)\/([^/]+)(\/messages)?$/.exec(url.pathname);
    const endpoint: WaEndpoint | undefined = download ? 'download' : !graph ? undefined : graph[3] ? (body.status === 'read' ? 'read' : 'messages')
      : graph[2] === this.phoneNumberId || this.numbers.has(graph[2]!) ? 'phone' : 'media';
    const fault = this.down ? { cut: true as const } : endpoint ? this.faults.get(endpoint)?.shift() : undefined;
    if (fault && 'cut' in fault) {
      call.refused = true;
      req.socket.destroy();
      return;
    }
    if (fault) return error(fault.status, fault.code ?? 1, fault.message ?? 'An unknown error occurred', undefined, fault.retryAfter !== undefined ? { 'retry-after': String(fault.retryAfter) } : {});
    if (token !== this.accessToken || this.revoked) return error(401, 190, 'Invalid OAuth access token - Cannot parse access token');

    if (download) {
      const file = this.media.get(download[1]!);
      if (!file) return void res.writeHead(404).end();
      call.status = 200;
      return void res.writeHead(200, { 'content-type': file.mime, 'content-length': String(file.data.length) }).end(file.data);
    }
    const upload = /^\/(v\d+\.\d+)\/([^/]+)\/media$/.exec(url.pathname);
    if (upload && req.method === 'POST') {
      if (upload[2] !== this.phoneNumberId && !this.numbers.has(upload[2]!)) return error(400, 100, 'Unsupported post request. Object with ID does not exist', undefined);
      if (body.messaging_product !== 'whatsapp') return error(400, 100, '(#100) The parameter messaging_product is required.');
      if (!body.file?.data?.length) return error(400, 100, '(#100) The parameter file is required.');
      const id = String(1_000_000_000_000 + this.media.size);
      this.media.set(id, { data: body.file.data, mime: String(body.type ?? body.file.type) });
      return send(200, { id });
    }
    if (!graph) return error(400, 100, 'Unknown path components');
    const [, , id] = graph;
    if (endpoint === 'phone' && req.method === 'GET') {
      return send(200, { display_phone_number: this.numbers.get(id!) ?? this.displayNumber, verified_name: this.verifiedName, id });
    }
    if (endpoint === 'media' && req.method === 'GET') {
      const file = this.media.get(id!);
      if (!file) return error(400, 100, 'Unsupported get request. Object with ID does not exist, cannot be loaded due to missing permissions, or does not support this operation.', undefined);
      return send(200, { url: `${this.apiRoot}/lookaside/${id}`, mime_type: file.mime, sha256: createHash('sha256').update(file.data).digest('base64'), file_size: file.data.length, id, messaging_product: 'whatsapp' });
    }
    if ((endpoint !== 'messages' && endpoint !== 'read') || req.method !== 'POST') return error(400, 100, 'Unsupported request');
    if (id !== this.phoneNumberId && !this.numbers.has(id!)) return error(400, 100, 'Unsupported post request. Object with ID does not exist', undefined);
    if (body.messaging_product !== 'whatsapp') return error(400, 100, '(#100) The parameter messaging_product is required.');
    if (body.status === 'read') {
      if (typeof body.message_id !== 'string') return error(400, 100, '(#100) The parameter message_id is required.');
      return send(200, { success: true });
    }
    const to = String(body.to ?? '');
    if (!/^\d{6,15}$/.test(to)) return error(400, 131009, '(#131009) Parameter value is not valid', 'Recipient phone number not in allowed list');
    const type = String(body.type ?? 'text');
    switch (type) {
      case 'text': {
        const content = body.text?.body;
        if (typeof content !== 'string' || !content) return error(400, 100, '(#100) The parameter text[\'body\'] is required.');
        if (content.length > 4096) return error(400, 100, '(#100) Param text[\'body\'] must be at most 4096 characters long.');
        break;
      }
      case 'image': case 'video': case 'audio': case 'document': case 'sticker':
        if (typeof body[type]?.link !== 'string' && typeof body[type]?.id !== 'string') return error(400, 100, `(#100) The parameter ${type}['link'] or ${type}['id'] is required.`);
        break;
      case 'reaction':
        if (typeof body.reaction?.message_id !== 'string') return error(400, 100, '(#100) The parameter reaction[\'message_id\'] is required.');
        break;
      case 'interactive': {
        const refused = interactiveRefusal(body.interactive);
        if (refused) return error(400, refused.code, refused.message, refused.details);
        break;
      }
      case 'template':
        if (!this.templates.has(String(body.template?.name))) return error(404, 132001, '(#132001) Template name does not exist in the translation', `template name (${String(body.template?.name)}) does not exist in ${String(body.template?.language?.code)}`);
        break;
      default:
        return error(400, 131051, '(#131051) Unsupported message type');
    }
    const messageId = wamid();
    send(200, { messaging_product: 'whatsapp', contacts: [{ input: to, wa_id: to }], messages: [{ id: messageId, ...(type === 'template' ? { message_status: 'accepted' } : {}) }] });
    // What became of it comes later, as Meta tells it: outside the window a free-form message is taken and then fails.
    const open = (this.heard.get(to) ?? 0) > Date.now() - WINDOW_MS;
    const status = (state: string, extra: Record<string, unknown> = {}) => ({ id: messageId, status: state, timestamp: String(Math.floor(Date.now() / 1000)), recipient_id: to, ...extra });
    if (type !== 'template' && !open) {
      this.notify({
        messaging_product: 'whatsapp', metadata: this.metadata(id),
        statuses: [status('failed', { errors: [{ code: 131047, title: 'Re-engagement message', message: 'Re-engagement message', error_data: { details: 'Message failed to send because more than 24 hours have passed since the customer last replied to this number.' }, href: 'https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes/' }] })],
      });
      return;
    }
    const pricing = { billable: true, pricing_model: 'PMP', category: type === 'template' ? 'utility' : 'service' };
    this.notify({ messaging_product: 'whatsapp', metadata: this.metadata(id), statuses: [status('sent', { pricing }), status('delivered', { pricing })] });
  }
}

/** What Meta answers for an interactive object it does not take: the code, message and details of its error. */
type Refusal = { code: number; message: string; details?: string };
const required = (path: string): Refusal => ({ code: 100, message: `(#100) The parameter interactive${path} is required.` });
const invalid = (details: string): Refusal => ({ code: 131009, message: '(#131009) Parameter value is not valid', details });
const text = (value: unknown): value is string => typeof value === 'string' && value.length > 0;

/**
 * An interactive message's shape as the Cloud API checks it
 * (developers.facebook.com/docs/whatsapp/cloud-api/messages/interactive-reply-buttons-messages,
 * ...-list-messages): reply buttons: a body of 1 to 1,024 characters, 1 to 3
 * buttons of type reply, each with an id of 1 to 256 characters (no leading
 * or trailing spaces) and a title of 1 to 20, titles and ids unique; a list:
 * a body of 1 to 4,096 characters, a button label of 1 to 20, 1 to 10
 * sections (titled, 24 at most, when there are several) of 1 to 10 rows in
 * all, each row an id of 1 to 200 characters, a title of 1 to 24 and a
 * description of at most 72, ids unique; a header and a footer of text at
 * most 60. Undefined when it is taken.
 */
export function interactiveRefusal(interactive: any): Refusal | undefined {
  if (!interactive || typeof interactive !== 'object') return { code: 100, message: '(#100) The parameter interactive is required.' };
  if (interactive.type !== 'button' && interactive.type !== 'list') return required("['type']");
  if (interactive.header !== undefined && (interactive.header?.type !== 'text' || !text(interactive.header.text) || interactive.header.text.length > 60)) return invalid('Header text length invalid. Min length: 1, Max length: 60');
  if (interactive.footer !== undefined && (!text(interactive.footer?.text) || interactive.footer.text.length > 60)) return invalid('Footer text length invalid. Min length: 1, Max length: 60');
  if (!text(interactive.body?.text)) return required("['body']['text']");
  const bodyMax = interactive.type === 'button' ? 1024 : 4096;
  if (interactive.body.text.length > bodyMax) return invalid(`Body text length invalid. Min length: 1, Max length: ${bodyMax}`);
  const action = interactive.action;
  if (!action || typeof action !== 'object') return required("['action']");
  const unique = (values: string[]) => new Set(values).size === values.length;
  if (interactive.type === 'button') {
    if (!Array.isArray(action.buttons) || action.buttons.length === 0) return required("['action']['buttons']");
    if (action.buttons.length > 3) return invalid('Buttons count invalid. Min: 1, Max: 3');
    for (const [index, button] of (action.buttons as any[]).entries()) {
      if (button?.type !== 'reply') return required(`['action']['buttons'][${index}]['type']`);
      if (!text(button.reply?.id)) return required(`['action']['buttons'][${index}]['reply']['id']`);
      if (!text(button.reply?.title)) return required(`['action']['buttons'][${index}]['reply']['title']`);
      if (button.reply.id.length > 256 || button.reply.id !== button.reply.id.trim()) return invalid('Button id invalid. Min length: 1, Max length: 256, no leading or trailing spaces');
      if (button.reply.title.length > 20) return invalid('Button title length invalid. Min length: 1, Max length: 20');
    }
    if (!unique(action.buttons.map((button: any) => button.reply.title))) return invalid('Button title must be unique within the message');
    if (!unique(action.buttons.map((button: any) => button.reply.id))) return invalid('Button id must be unique within the message');
    return undefined;
  }
  if (!text(action.button)) return required("['action']['button']");
  if (action.button.length > 20) return invalid('Button label length invalid. Min length: 1, Max length: 20');
  if (!Array.isArray(action.sections) || action.sections.length === 0) return required("['action']['sections']");
  if (action.sections.length > 10) return invalid('Sections count invalid. Min: 1, Max: 10');
  const rows: any[] = [];
  for (const [index, section] of (action.sections as any[]).entries()) {
    if (section?.title !== undefined && (!text(section.title) || section.title.length > 24)) return invalid('Section title length invalid. Min length: 1, Max length: 24');
    if (action.sections.length > 1 && section?.title === undefined) return required(`['action']['sections'][${index}]['title']`);
    if (!Array.isArray(section?.rows) || section.rows.length === 0) return required(`['action']['sections'][${index}]['rows']`);
    rows.push(...section.rows);
  }
  if (rows.length > 10) return invalid(`Total row count exceed max allowed count: 10`);
  for (const row of rows) {
    if (!text(row?.id) || row.id.length > 200) return invalid('Row id length invalid. Min length: 1, Max length: 200');
    if (!text(row.title) || row.title.length > 24) return invalid('Row title length invalid. Min length: 1, Max length: 24');
    if (row.description !== undefined && (typeof row.description !== 'string' || row.description.length > 72)) return invalid('Row description length invalid. Max length: 72');
  }
  if (!unique(rows.map((row) => row.id))) return invalid('Row id must be unique within the message');
  return undefined;
}
