/**
 * A stand-in for signal-cli's HTTP daemon (`signal-cli daemon --http`), for
 * what cannot run here (a Java program from GitHub, talking to Signal's
 * servers), built from its manual (signal-cli-jsonrpc(5), signal-cli(1)) and
 * its sources (HttpServerHandler, ServerSentEventSender, ReceiveHelper,
 * ReceiveCommand, SignalJsonRpcCommandHandler):
 *
 * - POST /api/v1/rpc takes JSON-RPC 2.0 (415 without application/json, 421
 *   for a Host header other than the address it listens on); errors carry
 *   signal-cli's codes (-1 a user error, -4 an untrusted identity, -5 a rate
 *   limit with the send's results as data, -32601 no such method);
 * - GET /api/v1/events is a server-sent event stream ("event:receive",
 *   "data:{account, envelope}", a ":" keep-alive every 15 s);
 * - GET /api/v1/check answers 200.
 *
 * Receiving is signal-cli's: what people send waits on "Signal's server"
 * until signal-cli receives. It receives all the time under --receive-mode
 * on-start (handing each envelope to the event streams connected, or to
 * nobody: lost), while an event stream is connected under manual, and else
 * only while a `receive` call runs (which it refuses while it receives by
 * itself). An envelope it took is acknowledged to the server and gone from
 * it: one written to a connection whose other end has gone is lost, as a
 * Java server notices a closed connection only when a second write to it
 * fails. Started without an account (multi-account mode), each call names
 * its account and listAccounts lists them; with one, `receive` refuses an
 * account parameter, as signal-cli's does.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

export interface SignalPerson { number?: string; uuid: string; name: string }
export interface SignalCall { method: string; params: Record<string, any>; at: number }
/** A message one of the accounts sent: to a person (recipient) or a group. */
export interface SignalSent { from: string; to: string; text: string; textStyle: string[]; timestamp: number; at: number }

type Fault = { code: number; message: string; data?: unknown } | { status: number } | { cut: true } | { hangMs: number };

interface Account { number: string; uuid: string; queue: unknown[] }
interface Pending { account: string; items: unknown[]; remaining: number; timeoutMs: number; timer?: NodeJS.Timeout; res: ServerResponse; id: unknown; gone: boolean }
interface Subscriber { account?: string; res: ServerResponse; gone: boolean; writesAfterGone: number }

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export class SignalCli {
  readonly calls: SignalCall[] = [];
  /** What signal-cli took from Signal's server and could hand to no one. */
  readonly lost: unknown[] = [];
  readonly sends: SignalSent[] = [];
  readonly typing: { to: string; stop: boolean; at: number }[] = [];
  readonly receipts: { recipient: string; timestamps: number[]; type: string; at: number }[] = [];
  /** Reactions the account sent (sendReaction), and files it sent (send's attachments, as data: URIs), decoded. */
  readonly reactions: { to: string; emoji: string; targetAuthor: string; targetTimestamp: number }[] = [];
  readonly attachments: { to: string; text: string; name: string; contentType: string; data: Buffer }[] = [];
  /** `receive` calls refused because signal-cli was receiving already. */
  refusedReceives = 0;
  readonly version = '0.14.6';
  port = 0;
  private server?: Server;
  private readonly sockets = new Set<Socket>();
  private readonly accounts = new Map<string, Account>();
  private readonly people = new Map<string, SignalPerson>();
  private readonly groups = new Map<string, { name: string; members: Set<string> }>();
  private readonly files = new Map<string, Buffer>();
  private readonly faults = new Map<string, Fault[]>();
  private readonly pending = new Set<Pending>();
  private readonly subscribers = new Set<Subscriber>();
  private keepAlive?: NodeJS.Timeout;
  private serial = 0;
  private clock = Date.now();
  readonly multiAccount: boolean;
  receiveMode: 'manual' | 'on-start';
  private readonly keepAliveMs: number;

  /** `accounts`: the numbers signal-cli has (registered or linked); with multiAccount it was started without -a. */
  constructor(options: { accounts: string[]; multiAccount?: boolean; receiveMode?: 'manual' | 'on-start'; keepAliveMs?: number }) {
    for (const number of options.accounts) this.accounts.set(number, { number, uuid: randomUUID(), queue: [] });
    this.multiAccount = options.multiAccount ?? false;
    this.receiveMode = options.receiveMode ?? 'manual';
    this.keepAliveMs = options.keepAliveMs ?? 15_000;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** The ACI of one of signal-cli's accounts. */
  aciOf(number: string): string {
    return this.accounts.get(number)!.uuid;
  }

  /** Listens on a free port, or on `port` (signal-cli started again, with what Signal's server kept meanwhile). */
  async start(port = 0): Promise<this> {
    this.server = createServer((req, res) => void this.answer(req, res));
    this.server.on('connection', (socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
    await new Promise<void>((resolve) => this.server!.listen(port, '127.0.0.1', resolve));
    this.port = (this.server.address() as { port: number }).port;
    this.keepAlive = setInterval(() => {
      for (const subscriber of [...this.subscribers]) this.write(subscriber, ':\n');
    }, this.keepAliveMs);
    for (const account of this.accounts.values()) this.pump(account);
    return this;
  }

  /** signal-cli stops: connections cut; what a `receive` in flight held stays in its message cache, handed over first when it is back. */
  async stop(): Promise<void> {
    clearInterval(this.keepAlive);
    for (const call of [...this.pending]) {
      clearTimeout(call.timer);
      this.accounts.get(call.account)?.queue.unshift(...call.items);
      this.pending.delete(call);
    }
    this.subscribers.clear();
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
    this.server = undefined;
  }

  /** Someone on Signal: a number Signal shows, unless `number` is null (their number hidden: known by their ACI alone). */
  person(name: string, number?: string | null): SignalPerson {
    const person: SignalPerson = { uuid: randomUUID(), name, ...(number === null ? {} : { number: number ?? `+1555${String(1_000_000 + ++this.serial).slice(1)}` }) };
    this.people.set(person.uuid, person);
    if (person.number) this.people.set(person.number, person);
    return person;
  }

  /** A group (its id as signal-cli shows it: the base64 of 32 bytes) with these members and the account. */
  group(name: string, members: SignalPerson[]): string {
    const id = randomBytes(32).toString('base64');
    this.groups.set(id, { name, members: new Set(members.map((member) => member.uuid)) });
    return id;
  }

  /** A file sent with a message, as signal-cli keeps it in its attachments folder. */
  file(data: Uint8Array, contentType: string, filename?: string): Record<string, unknown> {
    const id = `${randomBytes(10).toString('base64url')}.${contentType.split('/')[1] ?? 'bin'}`;
    this.files.set(id, Buffer.from(data));
    return { contentType, filename: filename ?? null, id, size: data.length, width: null, height: null, caption: null, uploadTimestamp: this.clock };
  }

  /**
   * A person's message to an account (the first by default), waiting on
   * Signal's server until signal-cli receives it; its timestamp is returned.
   * `mentions`: who each placeholder (U+FFFC) in the text names, in order.
   */
  say(from: SignalPerson, text: string, options: { to?: string; group?: string; mentions?: { number?: string; uuid: string }[]; files?: Record<string, unknown>[]; quote?: { id: number; author: { number?: string; uuid: string } } } = {}): number {
    const timestamp = this.nextTimestamp();
    const placeholders = [...text.matchAll(/\uFFFC/g)].map((match) => match.index);
    const dataMessage: Record<string, unknown> = {
      timestamp, message: text, expiresInSeconds: 0, viewOnce: false,
      ...(options.mentions ? { mentions: options.mentions.map((who, index) => ({ name: who.number ?? who.uuid, number: who.number ?? null, uuid: who.uuid, start: placeholders[index] ?? 0, length: 1 })) } : {}),
      ...(options.files ? { attachments: options.files } : {}),
      ...(options.quote ? { quote: { id: options.quote.id, author: options.quote.author.number ?? options.quote.author.uuid, authorNumber: options.quote.author.number ?? null, authorUuid: options.quote.author.uuid, text: '', attachments: [] } } : {}),
      ...(options.group ? { groupInfo: { groupId: options.group, groupName: this.groups.get(options.group)?.name ?? null, revision: 1, type: 'DELIVER' } } : {}),
    };
    this.envelope(from, { dataMessage }, options.to, timestamp);
    return timestamp;
  }

  /** An envelope of another kind from a person (typingMessage, receiptMessage, editMessage, syncMessage...). */
  envelope(from: SignalPerson, content: Record<string, unknown>, to?: string, timestamp = this.nextTimestamp()): void {
    this.push({
      envelope: {
        source: from.number ?? from.uuid, sourceNumber: from.number ?? null, sourceUuid: from.uuid, sourceName: from.name, sourceDevice: 1,
        timestamp, serverReceivedTimestamp: timestamp + 5, serverDeliveredTimestamp: timestamp + 9, ...content,
      },
    }, to);
  }

  /** Anything, as signal-cli would hand it over (its `account` added unless the item has one). */
  push(item: unknown, to = [...this.accounts.keys()][0]!): void {
    const account = this.accounts.get(to)!;
    const value = item && typeof item === 'object' && !Array.isArray(item) && !('account' in item) ? { account: to, ...item } : item;
    account.queue.push(value);
    this.pump(account);
  }

  /** Text written as one event's data on every event stream connected, as it is (what no JSON-RPC answer could carry). */
  rawEvent(data: string): void {
    for (const subscriber of [...this.subscribers]) this.write(subscriber, `event:receive\ndata:${data}\n\n`);
  }

  /** The next calls of a method fail this way, one fault per call. */
  fail(method: string, ...faults: Fault[]): void {
    this.faults.set(method, [...(this.faults.get(method) ?? []), ...faults]);
  }

  /** What still waits on Signal's server for an account. */
  waiting(account = [...this.accounts.keys()][0]!): number {
    return this.accounts.get(account)!.queue.length;
  }

  /** `receive` calls running now. */
  get receiving(): number {
    return this.pending.size;
  }

  /** `receive` calls still running for a client that has gone (they end at their timeout, and what they take is lost). */
  get orphaned(): number {
    return [...this.pending].filter((call) => call.gone).length;
  }

  /** Event streams connected now (as signal-cli counts them: until a write to one fails). */
  get streams(): number {
    return this.subscribers.size;
  }

  /** The texts sent to a person (by their number or ACI) or a group, in order. */
  texts(to: string | SignalPerson): string[] {
    return this.sentTo(to).map((sent) => sent.text);
  }

  sentTo(to: string | SignalPerson): SignalSent[] {
    const names = typeof to === 'string' ? [to] : [to.uuid, ...(to.number ? [to.number] : [])];
    return this.sends.filter((sent) => names.includes(sent.to));
  }

  private nextTimestamp(): number {
    this.clock = Math.max(this.clock + 1, Date.now());
    return this.clock;
  }

  private receivesByItself(account: string): boolean {
    return this.receiveMode === 'on-start' || [...this.subscribers].some((subscriber) => subscriber.account === undefined || subscriber.account === account);
  }

  /** Receives what waits for an account, when something receives: a `receive` in flight, or the continuous receiving. */
  private pump(account: Account): void {
    if (!this.server) return;
    for (;;) {
      const call = [...this.pending].find((entry) => entry.account === account.number);
      if (call) {
        if (account.queue.length === 0) return;
        call.items.push(account.queue.shift());
        call.remaining--;
        if (call.remaining === 0) this.finish(call);
        else this.restartTimer(call);
        continue;
      }
      if (!this.receivesByItself(account.number) || account.queue.length === 0) return;
      const item = account.queue.shift();
      const listeners = [...this.subscribers].filter((subscriber) => subscriber.account === undefined || subscriber.account === account.number);
      // Under on-start with nobody connected, it goes to signal-cli's own output: the gateway never sees it.
      if (listeners.length === 0) this.lost.push(item);
      let delivered = false;
      for (const subscriber of listeners) if (this.write(subscriber, `event:receive\ndata:${JSON.stringify(item)}\n\n`)) delivered = true;
      if (listeners.length > 0 && !delivered) this.lost.push(item);
    }
  }

  /** Writes to an event stream as Java's server does: the first write after the other end went still "succeeds", the next fails and ends the subscription. */
  private write(subscriber: Subscriber, text: string): boolean {
    if (!subscriber.gone) {
      subscriber.res.write(text);
      return true;
    }
    subscriber.writesAfterGone++;
    if (subscriber.writesAfterGone >= 2) {
      this.subscribers.delete(subscriber);
      for (const account of this.accounts.values()) this.pump(account);
    }
    return false;
  }

  private restartTimer(call: Pending): void {
    clearTimeout(call.timer);
    if (call.timeoutMs >= 0) call.timer = setTimeout(() => this.finish(call), call.timeoutMs);
  }

  /** A `receive` call ends: its answer is written, or, to a connection gone, lost with what it held. */
  private finish(call: Pending): void {
    clearTimeout(call.timer);
    if (!this.pending.delete(call)) return;
    if (call.gone || call.res.destroyed) {
      this.lost.push(...call.items);
    } else {
      this.json(call.res, { jsonrpc: '2.0', result: call.items, id: call.id });
    }
    const account = this.accounts.get(call.account);
    if (account) this.pump(account);
  }

  private json(res: ServerResponse, body: unknown, status = 200): void {
    const text = JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  }

  private hostAllowed(req: IncomingMessage): boolean {
    const host = req.headers.host ?? '';
    const match = /^(?:\[([^\]]+)\]|([^:]+))(?::(\d+))?$/.exec(host);
    if (!match) return false;
    const name = (match[1] ?? match[2] ?? '').toLowerCase();
    return ['127.0.0.1', 'localhost', '::1'].includes(name) && (match[3] === undefined || Number(match[3]) === this.port);
  }

  private async answer(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/api/v1/check') {
      res.writeHead(req.method === 'GET' ? 200 : 405).end();
      return;
    }
    if (path !== '/api/v1/rpc' && path !== '/api/v1/events') {
      res.writeHead(404).end();
      return;
    }
    if (!this.hostAllowed(req)) {
      res.writeHead(421).end();
      return;
    }
    if (path === '/api/v1/events') {
      this.subscribe(req, res);
      return;
    }
    if (req.method !== 'POST') {
      res.writeHead(405).end();
      return;
    }
    if (!String(req.headers['content-type'] ?? '').startsWith('application/json')) {
      res.writeHead(415).end();
      return;
    }
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    let request: any;
    try {
      request = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch (error) {
      this.json(res, { jsonrpc: '2.0', error: { code: -32700, message: (error as Error).message, data: null }, id: null });
      return;
    }
    if (typeof request?.method !== 'string') {
      this.json(res, { jsonrpc: '2.0', error: { code: -32600, message: 'method field must be set', data: null }, id: request?.id ?? null });
      return;
    }
    const params: Record<string, any> = request.params && typeof request.params === 'object' ? { ...request.params } : {};
    this.calls.push({ method: request.method, params: { ...params }, at: Date.now() });
    const fault = this.faults.get(request.method)?.shift();
    if (fault) {
      if ('hangMs' in fault) await sleep(fault.hangMs);
      else if ('cut' in fault) {
        req.socket.destroy();
        return;
      } else if ('status' in fault) {
        res.writeHead(fault.status).end();
        return;
      } else {
        this.json(res, { jsonrpc: '2.0', error: { code: fault.code, message: fault.message, data: fault.data ?? null }, id: request.id });
        return;
      }
    }
    const error = (code: number, message: string, data: unknown = null) => this.json(res, { jsonrpc: '2.0', error: { code, message, data }, id: request.id });
    const method = request.method as string;
    if (method === 'version') return this.json(res, { jsonrpc: '2.0', result: { version: this.version }, id: request.id });
    if (method === 'listAccounts') {
      if (!this.multiAccount) return error(-32601, 'Method not implemented');
      return this.json(res, { jsonrpc: '2.0', result: [...this.accounts.keys()].map((number) => ({ number })), id: request.id });
    }
    // Single-account methods: the account a multi-account daemon is asked for, or its only one.
    let account: Account;
    if (this.multiAccount) {
      if (typeof params.account === 'string') {
        const found = this.accounts.get(params.account);
        if (!found) return error(-32602, 'Specified account does not exist');
        account = found;
        delete params.account;
      } else if (this.accounts.size === 1) account = [...this.accounts.values()][0]!;
      else return error(-32602, 'Method requires valid account parameter');
    } else account = [...this.accounts.values()][0]!;

    if (method === 'receive') {
      // Its parameters are a Java record: a field it does not have is refused.
      const unknown = Object.keys(params).find((key) => !['timeout', 'maxMessages'].includes(key));
      if (unknown) return error(-32600, `Unrecognized field "${unknown}" (class org.asamk.signal.commands.ReceiveCommand$ReceiveParams), not marked as ignorable`);
      if (this.receivesByItself(account.number) || [...this.pending].some((call) => call.account === account.number)) {
        this.refusedReceives++;
        return error(-1, 'Receive command cannot be used if messages are already being received.');
      }
      const timeout = typeof params.timeout === 'number' ? params.timeout : 3;
      const call: Pending = { account: account.number, items: [], remaining: typeof params.maxMessages === 'number' && params.maxMessages >= 0 ? params.maxMessages : -1, timeoutMs: timeout < 0 ? -1 : timeout * 1000, res, id: request.id, gone: false };
      // signal-cli does not notice a client that left: the call runs its course, and its answer goes nowhere.
      res.on('close', () => {
        if (!res.writableFinished) call.gone = true;
      });
      this.pending.add(call);
      this.restartTimer(call);
      this.pump(account);
      return;
    }
    const recipients = ([] as unknown[]).concat(params.recipient ?? []).filter((value): value is string => typeof value === 'string');
    const groups = ([] as unknown[]).concat(params.groupId ?? []).filter((value): value is string => typeof value === 'string');
    const results = () => recipients.map((recipient) => {
      const person = this.people.get(recipient);
      return { recipientAddress: { uuid: person?.uuid ?? null, number: person?.number ?? null, username: null }, type: person ? 'SUCCESS' : 'UNREGISTERED_FAILURE' };
    });
    if (method === 'sendReaction') {
      // https://github.com/AsamK/signal-cli/blob/master/man/signal-cli.1.adoc#sendreaction
      if (recipients.length === 0 && groups.length === 0) return error(-1, 'No recipients given');
      if (typeof params.emoji !== 'string' || typeof params.targetAuthor !== 'string' || !Number.isInteger(params.targetTimestamp)) return error(-32602, 'Missing emoji, targetAuthor or targetTimestamp');
      for (const to of [...recipients, ...groups]) this.reactions.push({ to, emoji: params.emoji, targetAuthor: params.targetAuthor, targetTimestamp: Number(params.targetTimestamp) });
      return this.json(res, { jsonrpc: '2.0', result: { timestamp: this.nextTimestamp(), results: results() }, id: request.id });
    }
    if (method === 'send') {
      if (recipients.length === 0 && groups.length === 0) return error(-1, 'No recipients given');
      // Attachments as data: URIs (data:<type>;filename=<name>;base64,<data>), as signal-cli's send takes them.
      const files = ([] as unknown[]).concat(params.attachments ?? params.attachment ?? []).map(String);
      for (const file of files) {
        const uri = /^data:([^;,]+);filename=([^;,]+);base64,(.*)$/s.exec(file);
        if (!uri) return error(-1, `Invalid attachment: ${file.slice(0, 40)}`);
        for (const to of [...recipients, ...groups]) this.attachments.push({ to, text: String(params.message ?? ''), contentType: uri[1]!, name: uri[2]!, data: Buffer.from(uri[3]!, 'base64') });
      }
      if ((typeof params.message !== 'string' || params.message === '') && files.length === 0) return error(-1, 'Sending empty message is not allowed, either a message, attachment or sticker must be given.');
      for (const group of groups) if (!this.groups.has(group)) return error(-1, `Invalid group id: ${group}`);
      const timestamp = this.nextTimestamp();
      const answer = results();
      if (answer.length > 0 && answer.every((result) => result.type !== 'SUCCESS')) return error(-1, 'Failed to send message', { response: { timestamp, results: answer } });
      const textStyle = ([] as unknown[]).concat(params.textStyle ?? params.textStyles ?? []).map(String);
      for (const to of [...recipients.filter((recipient) => this.people.has(recipient)), ...groups]) this.sends.push({ from: account.number, to, text: params.message, textStyle, timestamp, at: Date.now() });
      return this.json(res, { jsonrpc: '2.0', result: { timestamp, results: answer }, id: request.id });
    }
    if (method === 'sendTyping') {
      if (recipients.length === 0 && groups.length === 0) return error(-1, 'No recipients given');
      for (const to of [...recipients, ...groups]) this.typing.push({ to, stop: params.stop === true, at: Date.now() });
      return this.json(res, { jsonrpc: '2.0', result: { timestamp: this.nextTimestamp(), results: results() }, id: request.id });
    }
    if (method === 'sendReceipt') {
      if (typeof params.recipient !== 'string') return error(-1, 'Missing recipient');
      const timestamps = ([] as unknown[]).concat(params.targetTimestamp ?? []).map(Number);
      this.receipts.push({ recipient: params.recipient, timestamps, type: typeof params.type === 'string' ? params.type : 'read', at: Date.now() });
      return this.json(res, { jsonrpc: '2.0', result: { timestamp: this.nextTimestamp(), results: results() }, id: request.id });
    }
    if (method === 'getAttachment') {
      const data = typeof params.id === 'string' ? this.files.get(params.id) : undefined;
      if (!data) return error(-1, `Could not find attachment with ID: ${String(params.id)}`);
      return this.json(res, { jsonrpc: '2.0', result: { data: data.toString('base64') }, id: request.id });
    }
    if (method === 'getUserStatus') {
      return this.json(res, {
        jsonrpc: '2.0', id: request.id,
        result: recipients.map((recipient) => {
          const own = this.accounts.get(recipient);
          const person = own ? { number: own.number, uuid: own.uuid } : this.people.get(recipient);
          return { recipient, number: person?.number ?? null, uuid: person?.uuid ?? null, isRegistered: Boolean(person) };
        }),
      });
    }
    if (method === 'listGroups') {
      return this.json(res, { jsonrpc: '2.0', id: request.id, result: [...this.groups].map(([id, group]) => ({ id, name: group.name, isMember: true, members: [...group.members].map((uuid) => ({ uuid, number: this.people.get(uuid)?.number ?? null })) })) });
    }
    error(-32601, 'Method not implemented');
  }

  private subscribe(req: IncomingMessage, res: ServerResponse): void {
    if (req.method !== 'GET') {
      res.writeHead(405).end();
      return;
    }
    const account = new URL(req.url ?? '/', 'http://x').searchParams.get('account') ?? undefined;
    if (this.multiAccount && account !== undefined && !this.accounts.has(account)) {
      res.writeHead(400).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.flushHeaders();
    const subscriber: Subscriber = { ...(this.multiAccount && account ? { account } : {}), res, gone: false, writesAfterGone: 0 };
    res.on('close', () => {
      subscriber.gone = true;
    });
    this.subscribers.add(subscriber);
    for (const entry of this.accounts.values()) this.pump(entry);
  }
}
