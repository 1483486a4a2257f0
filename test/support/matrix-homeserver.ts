/**
 * A stand-in for a Matrix homeserver, for what cannot run here (no
 * homeserver installs from Debian or the npm registry): the part of the
 * client-server API (https://spec.matrix.org/v1.11/client-server-api/) a bot
 * and a person use. Rooms with members (join, invite, leave, with
 * `is_direct` and stripped invite state), one stream of events whose
 * positions are the sync tokens, long-polled /sync (filters' timeline
 * limits and types, `limited` with prev_batch, invites and leaves once),
 * sends deduplicated by transaction id per access token, typing, joined
 * members, aliases, profiles, authenticated media; errors as the
 * specification gives them (401 M_UNKNOWN_TOKEN, 403 M_FORBIDDEN, 404
 * M_UNRECOGNIZED, 429 M_LIMIT_EXCEEDED with retry_after_ms). For end-to-end
 * encryption: each access token is a device; device keys, one-time and
 * fallback keys uploaded, queried and claimed (/keys/upload, /keys/query,
 * /keys/claim); to-device messages sent (/sendToDevice) and handed to their
 * device in its /sync until a later sync acknowledges them; device_lists,
 * one-time key counts and unused fallback key types in /sync; a room's
 * state (m.room.encryption) given with the sync that first shows it. Tests
 * may add faults (a status, or a connection cut halfway through an answer)
 * and events no real homeserver would send.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import type { Socket } from 'node:net';

type Membership = 'join' | 'invite' | 'leave';
interface Room { id: string; members: Map<string, { membership: Membership; pos: number }>; encrypted: boolean; public: boolean; alias?: string }
/** A stream entry: a room event, a to-device message (room '', `to` its device), or a user's device keys changing (room '', `keysOf`). */
interface Entry { pos: number; room: string; event: Record<string, any>; to?: string; keysOf?: string }
export interface MatrixCall { method: string; path: string; user?: string; body: any }
/** A status answered instead, a connection cut half way through the answer, or the call carried out and its answer never sent. */
export type MatrixFault = { status: number; body: Record<string, unknown> } | { cut: true } | { silent: true };

const SERVER = 'example.test';
const json = (res: ServerResponse, status: number, body: unknown) => {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
};
const problem = (res: ServerResponse, status: number, errcode: string, error: string, extra: Record<string, unknown> = {}) => json(res, status, { errcode, error, ...extra });

export class Homeserver {
  readonly server = SERVER;
  private readonly users = new Map<string, { token: string; displayName?: string }>();
  /** Each access token's user and device. */
  private readonly tokens = new Map<string, { user: string; device: string }>();
  /** Device keys as uploaded, by user then device. */
  readonly deviceKeys = new Map<string, Map<string, Record<string, any>>>();
  /** One-time and fallback keys of each device (user and device id, a newline between), by key id. */
  private readonly oneTimeKeys = new Map<string, Map<string, unknown>>();
  private readonly fallbackKeys = new Map<string, { id: string; key: unknown; used: boolean }>();
  /** The stream position each device has acknowledged (its to-device messages up to it are deleted). */
  private readonly acked = new Map<string, number>();
  private readonly rooms = new Map<string, Room>();
  private readonly aliases = new Map<string, string>();
  /** Every event, in stream order: an event's position is its index + 1, and a sync token names the last position seen. */
  readonly stream: Entry[] = [];
  private readonly txns = new Map<string, string>();
  private readonly media = new Map<string, { type: string; bytes: Buffer; filename?: string }>();
  /** Each user's account data, by type. */
  readonly accountData = new Map<string, Map<string, unknown>>();
  readonly calls: MatrixCall[] = [];
  readonly typing: { room: string; user: string; typing: boolean }[] = [];
  /** Faults for calls whose path matches, each used once, in order. */
  private readonly faults: { path: RegExp; fault: MatrixFault; user?: string }[] = [];
  /** Calls carried out whose answers were never sent (the `silent` fault). */
  readonly silenced: { method: string; path: string }[] = [];
  private readonly waiters = new Set<() => void>();
  private readonly sockets = new Set<Socket>();
  private http?: Server;
  /** With TLS, a plain listener beside it for the people of the tests (whose fetch does not trust the test certificate). */
  private plain?: Server;
  port = 0;
  private plainPort = 0;
  private serial = 0;
  /** With a key and certificate, the homeserver speaks https. */
  private readonly tls?: { key: string; cert: string };

  constructor(tls?: { key: string; cert: string }) {
    this.tls = tls;
  }

  get url(): string {
    return `${this.tls ? 'https' : 'http'}://127.0.0.1:${this.port}`;
  }

  /** Where people's clients talk to it. */
  get peopleUrl(): string {
    return this.tls ? `http://127.0.0.1:${this.plainPort}` : this.url;
  }

  async start(port = 0): Promise<this> {
    const handle = (req: IncomingMessage, res: ServerResponse) => void this.answer(req, res).catch((error: unknown) => {
      if (!res.headersSent) problem(res, 500, 'M_UNKNOWN', (error as Error).message);
    });
    this.http = this.tls ? createTlsServer(this.tls, handle) : createServer(handle);
    if (this.tls) this.plain = createServer(handle);
    for (const server of [this.http, this.plain]) {
      server?.on('connection', (socket) => {
        this.sockets.add(socket);
        socket.on('close', () => this.sockets.delete(socket));
      });
    }
    await new Promise<void>((resolve) => this.http!.listen(port, '127.0.0.1', resolve));
    this.port = (this.http.address() as { port: number }).port;
    if (this.plain) {
      await new Promise<void>((resolve) => this.plain!.listen(this.plainPort, '127.0.0.1', resolve));
      this.plainPort = (this.plain.address() as { port: number }).port;
    }
    return this;
  }

  /** Stops answering (every connection cut, the port closed); rooms and events are kept for resume(). */
  async halt(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    for (const wake of this.waiters) wake();
    await Promise.all([this.http, this.plain].map((server) => new Promise<void>((resolve) => server?.close(() => resolve()) ?? resolve())));
  }

  async resume(): Promise<void> {
    await this.start(this.port);
  }

  async stop(): Promise<void> {
    await this.halt();
  }

  /** A new user and their access token (a device of its own). */
  register(localpart: string, displayName?: string): { userId: string; token: string; deviceId: string } {
    const userId = `@${localpart}:${SERVER}`;
    const token = `syt_${localpart}_${randomBytes(12).toString('hex')}`;
    this.users.set(userId, { token, ...(displayName ? { displayName } : {}) });
    const deviceId = this.login(userId, token);
    return { userId, token, deviceId };
  }

  /** Another access token of a user, and its new device. */
  login(userId: string, token = `syt_${randomBytes(12).toString('hex')}`): string {
    const deviceId = randomBytes(8).toString('hex').toUpperCase().replace(/[0-9]/g, (digit) => 'GHIJKLMNOP'[Number(digit)]!).slice(0, 10);
    this.tokens.set(token, { user: userId, device: deviceId });
    return deviceId;
  }

  /** Another access token for a user, with its new device. */
  newToken(userId: string): { token: string; deviceId: string } {
    const token = `syt_${randomBytes(12).toString('hex')}`;
    return { token, deviceId: this.login(userId, token) };
  }

  /** The next call whose path matches (made by `user`, when given) gets the fault. */
  /** A file of the media store by its mxc:// address: its type and bytes as uploaded. */
  mediaOf(mxc: string): { type: string; bytes: Buffer; filename?: string } | undefined {
    const match = /^mxc:\/\/([^/]+)\/([^/]+)$/.exec(mxc);
    return match?.[1] === SERVER ? this.media.get(match[2]!) : undefined;
  }

  fault(path: RegExp, fault: MatrixFault, user?: string): void {
    this.faults.push({ path, fault, ...(user ? { user } : {}) });
  }

  membership(room: string, user: string): Membership | undefined {
    return this.rooms.get(room)?.members.get(user)?.membership;
  }

  /** The events of a room, as stored. */
  events(room: string): Record<string, any>[] {
    return this.stream.filter((entry) => entry.room === room).map((entry) => entry.event);
  }

  /** Puts an event into a room's timeline as it is given, however malformed (a homeserver federating from a broken server might). */
  inject(room: string, event: unknown): void {
    this.append(room, event as Record<string, any>);
  }

  private append(room: string, event: Record<string, any>): Record<string, any> {
    const pos = this.stream.length + 1;
    this.stream.push({ pos, room, event });
    for (const wake of [...this.waiters]) wake();
    return event;
  }

  private event(room: string, sender: string, type: string, content: Record<string, unknown>, stateKey?: string): Record<string, any> {
    return this.append(room, {
      type, sender, content, room_id: room, event_id: `$${(++this.serial).toString(36)}${randomBytes(8).toString('base64url')}`,
      origin_server_ts: Date.now(), ...(stateKey === undefined ? {} : { state_key: stateKey }),
    });
  }

  private setMembership(room: Room, user: string, membership: Membership, sender: string, extra: Record<string, unknown> = {}): void {
    const event = this.event(room.id, sender, 'm.room.member', { membership, ...extra }, user);
    room.members.set(user, { membership, pos: this.stream.length });
    void event;
  }

  /** Makes a room as `creator` would with POST /createRoom. */
  createRoom(creator: string, options: { invite?: string[]; isDirect?: boolean; encrypted?: boolean; public?: boolean; alias?: string } = {}): string {
    const id = `!${randomBytes(9).toString('base64url').replace(/[-_]/g, 'x')}:${SERVER}`;
    const room: Room = { id, members: new Map(), encrypted: false, public: options.public ?? false };
    this.rooms.set(id, room);
    this.event(id, creator, 'm.room.create', { creator, room_version: '10' }, '');
    this.setMembership(room, creator, 'join', creator);
    if (options.encrypted) this.encrypt(id, creator);
    if (options.alias) {
      room.alias = `#${options.alias}:${SERVER}`;
      this.aliases.set(room.alias, id);
    }
    for (const user of options.invite ?? []) this.setMembership(room, user, 'invite', creator, options.isDirect ? { is_direct: true } : {});
    return id;
  }

  encrypt(room: string, sender: string): void {
    this.rooms.get(room)!.encrypted = true;
    this.event(room, sender, 'm.room.encryption', { algorithm: 'm.megolm.v1.aes-sha2' }, '');
  }

  private auth(req: IncomingMessage, url: URL): { user: string; device: string } | { status: number; errcode: string; error: string } {
    const header = req.headers.authorization;
    const token = header?.startsWith('Bearer ') ? header.slice(7) : url.searchParams.get('access_token');
    if (!token) return { status: 401, errcode: 'M_MISSING_TOKEN', error: 'Missing access token' };
    const known = this.tokens.get(token);
    if (!known) return { status: 401, errcode: 'M_UNKNOWN_TOKEN', error: 'Unrecognised access token' };
    return known;
  }

  /** Whether two users share a room (either joined or invited). */
  private shareRoom(a: string, b: string): boolean {
    if (a === b) return true;
    for (const room of this.rooms.values()) {
      const one = room.members.get(a)?.membership;
      const other = room.members.get(b)?.membership;
      if ((one === 'join' || one === 'invite') && (other === 'join' || other === 'invite')) return true;
    }
    return false;
  }

  /** The key endpoints (/keys/upload, /keys/query, /keys/claim) and /sendToDevice; undefined when the path is none of them. */
  private keys(method: string, path: string, body: any, user: string, device: string, res: ServerResponse): true | undefined {
    const slot = `${user}\n${device}`;
    const counts = () => ({ signed_curve25519: this.oneTimeKeys.get(slot)?.size ?? 0 });
    let match: RegExpExecArray | null;
    if (method === 'POST' && path === '/_matrix/client/v3/keys/upload') {
      if (body.device_keys !== undefined) {
        const keys = body.device_keys;
        if (typeof keys !== 'object' || keys === null || keys.user_id !== user || keys.device_id !== device) {
          problem(res, 400, 'M_INVALID_PARAM', 'device_keys must be this device\'s');
          return true;
        }
        const mine = this.deviceKeys.get(user) ?? new Map();
        this.deviceKeys.set(user, mine);
        const before = JSON.stringify(mine.get(device));
        mine.set(device, keys);
        if (before !== JSON.stringify(keys)) this.stream.push({ pos: this.stream.length + 1, room: '', event: {}, keysOf: user });
      }
      for (const [id, key] of Object.entries(body.one_time_keys ?? {})) {
        const kept = this.oneTimeKeys.get(slot) ?? new Map();
        this.oneTimeKeys.set(slot, kept);
        kept.set(id, key);
      }
      for (const [id, key] of Object.entries(body.fallback_keys ?? {})) this.fallbackKeys.set(slot, { id, key, used: false });
      for (const wake of [...this.waiters]) wake();
      json(res, 200, { one_time_key_counts: counts() });
      return true;
    }
    if (method === 'POST' && path === '/_matrix/client/v3/keys/query') {
      const asked = body.device_keys;
      if (typeof asked !== 'object' || asked === null) {
        problem(res, 400, 'M_BAD_JSON', 'device_keys is required');
        return true;
      }
      const found: Record<string, Record<string, unknown>> = {};
      for (const [who, devices] of Object.entries<any>(asked)) {
        const known = this.deviceKeys.get(who) ?? new Map();
        const wanted = Array.isArray(devices) && devices.length ? devices : [...known.keys()];
        found[who] = Object.fromEntries(wanted.filter((id: string) => known.has(id)).map((id: string) => [id, known.get(id)]));
      }
      json(res, 200, { device_keys: found, failures: {}, master_keys: {}, self_signing_keys: {}, user_signing_keys: {} });
      return true;
    }
    if (method === 'POST' && path === '/_matrix/client/v3/keys/claim') {
      const claimed: Record<string, Record<string, Record<string, unknown>>> = {};
      for (const [who, devices] of Object.entries<any>(body.one_time_keys ?? {})) {
        for (const [id, algorithm] of Object.entries<any>(devices ?? {})) {
          const at = `${who}\n${id}`;
          const kept = this.oneTimeKeys.get(at);
          const first = [...(kept?.entries() ?? [])].find(([keyId]) => keyId.startsWith(`${algorithm}:`));
          let key: [string, unknown] | undefined;
          if (first) {
            kept!.delete(first[0]);
            key = first;
          } else {
            const fallback = this.fallbackKeys.get(at);
            if (fallback && fallback.id.startsWith(`${algorithm}:`)) {
              fallback.used = true;
              key = [fallback.id, fallback.key];
            }
          }
          if (key) ((claimed[who] ??= {})[id] = { [key[0]]: key[1] });
        }
      }
      json(res, 200, { one_time_keys: claimed, failures: {} });
      return true;
    }
    if (method === 'PUT' && (match = /^\/_matrix\/client\/v3\/sendToDevice\/([^/]+)\/([^/]+)$/.exec(path))) {
      const key = `${user}\n${device}\nto-device\n${decodeURIComponent(match[2]!)}`;
      if (this.txns.has(key)) {
        json(res, 200, {});
        return true;
      }
      this.txns.set(key, '');
      const type = decodeURIComponent(match[1]!);
      for (const [who, devices] of Object.entries<any>(body.messages ?? {})) {
        for (const [id, content] of Object.entries<any>(devices ?? {})) {
          const targets = id === '*' ? [...(this.deviceKeys.get(who)?.keys() ?? [])] : [id];
          for (const target of targets) {
            this.stream.push({ pos: this.stream.length + 1, room: '', to: `${who}\n${target}`, event: { type, sender: user, content } });
          }
        }
      }
      for (const wake of [...this.waiters]) wake();
      json(res, 200, {});
      return true;
    }
    return undefined;
  }

  private async answer(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://x');
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks);
    let body: any = {};
    if (raw.length && !url.pathname.startsWith('/_matrix/media/v3/upload')) {
      try {
        body = JSON.parse(raw.toString('utf8'));
      } catch {
        return problem(res, 400, 'M_NOT_JSON', 'Content not JSON.');
      }
    }
    const path = url.pathname;
    if (path === '/_matrix/client/versions') return json(res, 200, { versions: ['v1.9', 'v1.10', 'v1.11'], unstable_features: {} });
    const who = this.auth(req, url);
    this.calls.push({ method: req.method!, path, ...('user' in who ? { user: who.user } : {}), body });
    const faultAt = this.faults.findIndex((entry) => entry.path.test(path) && (!entry.user || ('user' in who && entry.user === who.user)));
    if (faultAt >= 0) {
      const [{ fault }] = this.faults.splice(faultAt, 1);
      if ('silent' in fault) {
        // Done as asked, but the caller never hears so (a crash between the server's acceptance and its answer).
        this.silenced.push({ method: req.method!, path });
        res.writeHead = (() => res) as typeof res.writeHead;
        res.end = (() => res) as typeof res.end;
      } else if ('cut' in fault) {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': '4096' });
        res.write('{"next_batch":"s1","rooms":{"join":{"!cut');
        setTimeout(() => res.socket?.destroy(), 20);
        return;
      } else {
        return json(res, fault.status, fault.body);
      }
    }
    if (!('user' in who)) return problem(res, who.status, who.errcode, who.error, who.errcode === 'M_UNKNOWN_TOKEN' ? { soft_logout: false } : {});
    const { user, device } = who;
    const method = req.method;
    let match: RegExpExecArray | null;
    const decode = (value: string) => decodeURIComponent(value);

    if (method === 'GET' && path === '/_matrix/client/v3/account/whoami') return json(res, 200, { user_id: user, device_id: device, is_guest: false });
    if (this.keys(method!, path, body, user, device, res)) return;
    if (method === 'GET' && (match = /^\/_matrix\/client\/v3\/profile\/([^/]+)\/displayname$/.exec(path))) {
      const profile = this.users.get(decode(match[1]!));
      if (!profile) return problem(res, 404, 'M_NOT_FOUND', 'Profile was not found');
      return json(res, 200, profile.displayName ? { displayname: profile.displayName } : {});
    }
    if (method === 'GET' && path === '/_matrix/client/v3/sync') return this.sync(req, res, user, device, url);
    if (method === 'POST' && path === '/_matrix/client/v3/createRoom') {
      if (body.invite !== undefined && (!Array.isArray(body.invite) || body.invite.some((id: unknown) => typeof id !== 'string'))) return problem(res, 400, 'M_BAD_JSON', 'invite must be a list of user ids');
      const encrypted = Array.isArray(body.initial_state) && body.initial_state.some((event: any) => event?.type === 'm.room.encryption');
      return json(res, 200, { room_id: this.createRoom(user, { invite: body.invite, isDirect: body.is_direct === true, encrypted, public: body.preset === 'public_chat', alias: body.room_alias_name }) });
    }
    if (method === 'POST' && (match = /^\/_matrix\/client\/v3\/(?:rooms\/([^/]+)\/join|join\/([^/]+))$/.exec(path))) {
      const target = decode(match[1] ?? match[2]!);
      const id = target.startsWith('#') ? this.aliases.get(target) : target;
      const room = id ? this.rooms.get(id) : undefined;
      if (!room) return problem(res, 404, 'M_NOT_FOUND', 'No known servers');
      const now = room.members.get(user)?.membership;
      if (now !== 'join') {
        if (now !== 'invite' && !room.public) return problem(res, 403, 'M_FORBIDDEN', 'You are not invited to this room.');
        this.setMembership(room, user, 'join', user);
      }
      return json(res, 200, { room_id: room.id });
    }
    if ((match = /^\/_matrix\/client\/v3\/rooms\/([^/]+)\/(.+)$/.exec(path))) {
      const room = this.rooms.get(decode(match[1]!));
      const rest = match[2]!;
      if (!room) return problem(res, 404, 'M_NOT_FOUND', 'Unknown room');
      const mine = room.members.get(user)?.membership;
      if (method === 'POST' && rest === 'leave') {
        if (mine !== 'join' && mine !== 'invite') return problem(res, 403, 'M_FORBIDDEN', 'You are not in this room.');
        this.setMembership(room, user, 'leave', user, typeof body.reason === 'string' ? { reason: body.reason } : {});
        return json(res, 200, {});
      }
      if (method === 'POST' && rest === 'invite') {
        if (mine !== 'join') return problem(res, 403, 'M_FORBIDDEN', 'You are not in this room.');
        if (typeof body.user_id !== 'string') return problem(res, 400, 'M_MISSING_PARAM', 'Missing user_id');
        if (room.members.get(body.user_id)?.membership === 'join') return problem(res, 403, 'M_FORBIDDEN', `${body.user_id} is already in the room.`);
        this.setMembership(room, body.user_id, 'invite', user, body.is_direct ? { is_direct: true } : {});
        return json(res, 200, {});
      }
      if (method === 'GET' && rest === 'messages') {
        // Paginated history: from a token back (dir=b) or forward, stopping at `to`, newest first going back.
        if (mine !== 'join') return problem(res, 403, 'M_FORBIDDEN', 'You aren\'t a member of the room');
        const token = (name: string) => {
          const value = url.searchParams.get(name);
          if (value === null) return undefined;
          const parsed = /^s(\d+)$/.exec(value);
          return parsed ? Number(parsed[1]) : Number.NaN;
        };
        const from = token('from');
        const to = token('to');
        if (Number.isNaN(from) || Number.isNaN(to)) return problem(res, 400, 'M_INVALID_PARAM', 'Invalid token');
        const limit = Math.min(Number(url.searchParams.get('limit') ?? 10) || 10, 1000);
        let types: string[] | undefined;
        try {
          const filter = JSON.parse(url.searchParams.get('filter') ?? '{}');
          types = Array.isArray(filter.types) ? filter.types : undefined;
        } catch {
          return problem(res, 400, 'M_INVALID_PARAM', 'filter is not valid JSON');
        }
        const backwards = url.searchParams.get('dir') === 'b';
        const start = from ?? (backwards ? this.stream.length : 0);
        const inRange = this.stream.filter((entry) => entry.room === room.id && (!types || types.includes(entry.event?.type))
          && (backwards ? entry.pos <= start && (to === undefined || entry.pos > to) : entry.pos > start && (to === undefined || entry.pos <= to)));
        const page = backwards ? inRange.reverse().slice(0, limit) : inRange.slice(0, limit);
        const more = page.length < inRange.length;
        const last = page.at(-1);
        return json(res, 200, { chunk: page.map((entry) => entry.event), start: `s${start}`, ...(more && last ? { end: `s${backwards ? last.pos - 1 : last.pos}` } : {}) });
      }
      if (method === 'GET' && (match = /^state\/([^/]+)\/?([^/]*)$/.exec(rest))) {
        if (mine !== 'join') return problem(res, 403, 'M_FORBIDDEN', 'You aren\'t a member of the room');
        const type = decode(match[1]!);
        const key = decode(match[2] ?? '');
        const found = this.stream.filter((entry) => entry.room === room.id && entry.event?.type === type && entry.event?.state_key === key).at(-1);
        return found ? json(res, 200, found.event.content) : problem(res, 404, 'M_NOT_FOUND', 'Event not found');
      }
      if (method === 'GET' && rest === 'joined_members') {
        if (mine !== 'join') return problem(res, 403, 'M_FORBIDDEN', 'You aren\'t a member of the room');
        const joined = Object.fromEntries([...room.members].filter(([, member]) => member.membership === 'join').map(([id]) => [id, { display_name: this.users.get(id)?.displayName ?? null, avatar_url: null }]));
        return json(res, 200, { joined });
      }
      if (method === 'PUT' && (match = /^typing\/([^/]+)$/.exec(rest))) {
        if (decode(match[1]!) !== user) return problem(res, 403, 'M_FORBIDDEN', 'Cannot set another user\'s typing state');
        if (mine !== 'join') return problem(res, 403, 'M_FORBIDDEN', 'You are not in this room.');
        this.typing.push({ room: room.id, user, typing: body.typing === true });
        return json(res, 200, {});
      }
      if (method === 'PUT' && (match = /^send\/([^/]+)\/([^/]+)$/.exec(rest))) {
        if (mine !== 'join') return problem(res, 403, 'M_FORBIDDEN', `User ${user} not in room ${room.id}`);
        const key = `${req.headers.authorization}\n${decode(match[2]!)}`;
        const seen = this.txns.get(key);
        if (seen) return json(res, 200, { event_id: seen });
        if (raw.length > 65_536) return problem(res, 413, 'M_TOO_LARGE', 'Event too large');
        const event = this.event(room.id, user, decode(match[1]!), body);
        this.txns.set(key, event.event_id);
        return json(res, 200, { event_id: event.event_id });
      }
      return problem(res, 404, 'M_UNRECOGNIZED', 'Unrecognized request');
    }
    if ((match = /^\/_matrix\/client\/v3\/user\/([^/]+)\/account_data\/([^/]+)$/.exec(path))) {
      if (decode(match[1]!) !== user) return problem(res, 403, 'M_FORBIDDEN', 'Cannot access account data of another user');
      const data = this.accountData.get(user) ?? new Map<string, unknown>();
      this.accountData.set(user, data);
      if (method === 'PUT') {
        data.set(decode(match[2]!), body);
        return json(res, 200, {});
      }
      if (method === 'GET') return data.has(decode(match[2]!)) ? json(res, 200, data.get(decode(match[2]!))) : problem(res, 404, 'M_NOT_FOUND', 'Account data not found');
    }
    if (method === 'GET' && (match = /^\/_matrix\/client\/v3\/directory\/room\/([^/]+)$/.exec(path))) {
      const id = this.aliases.get(decode(match[1]!));
      return id ? json(res, 200, { room_id: id, servers: [SERVER] }) : problem(res, 404, 'M_NOT_FOUND', 'Room alias not found');
    }
    if (method === 'POST' && path === '/_matrix/media/v3/upload') {
      const id = randomBytes(12).toString('base64url').replace(/[-_]/g, 'm');
      const filename = url.searchParams.get('filename');
      this.media.set(id, { type: String(req.headers['content-type'] ?? 'application/octet-stream'), bytes: raw, ...(filename === null ? {} : { filename }) });
      return json(res, 200, { content_uri: `mxc://${SERVER}/${id}` });
    }
    if (method === 'GET' && (match = /^\/_matrix\/client\/v1\/media\/download\/([^/]+)\/([^/]+)$/.exec(path))) {
      const file = decode(match[1]!) === SERVER ? this.media.get(decode(match[2]!)) : undefined;
      if (!file) return problem(res, 404, 'M_NOT_FOUND', 'Not found');
      res.writeHead(200, { 'content-type': file.type, 'content-length': file.bytes.length });
      res.end(file.bytes);
      return;
    }
    return problem(res, 404, 'M_UNRECOGNIZED', 'Unrecognized request');
  }

  /** GET /sync: what changed for the user after `since`, waiting up to `timeout` ms for something when nothing has. */
  private async sync(req: IncomingMessage, res: ServerResponse, user: string, device: string, url: URL): Promise<void> {
    const since = url.searchParams.get('since');
    let after = 0;
    if (since) {
      const parsed = /^s(\d+)$/.exec(since);
      if (!parsed) return problem(res, 400, 'M_INVALID_PARAM', 'Invalid stream token');
      after = Number(parsed[1]);
    }
    let filter: any = {};
    const given = url.searchParams.get('filter');
    if (given) {
      try {
        filter = given.startsWith('{') ? JSON.parse(given) : {};
      } catch {
        return problem(res, 400, 'M_INVALID_PARAM', 'filter is not valid JSON');
      }
    }
    // A sync from a token acknowledges the to-device messages before it: they are deleted.
    const slot = `${user}\n${device}`;
    if (since) this.acked.set(slot, Math.max(this.acked.get(slot) ?? 0, after));
    const timeout = Math.min(Number(url.searchParams.get('timeout') ?? 0) || 0, 60_000);
    const until = Date.now() + timeout;
    let closed = false;
    let wakeNow = () => undefined as void;
    res.once('close', () => {
      closed = true;
      wakeNow();
    });
    for (;;) {
      const answer = this.changes(user, device, since ? after : undefined, filter);
      if (answer.any || !since || Date.now() >= until || !this.http?.listening) return json(res, 200, answer.body);
      await new Promise<void>((resolve) => {
        const wake = () => {
          this.waiters.delete(wake);
          clearTimeout(timer);
          resolve();
        };
        const timer = setTimeout(wake, until - Date.now());
        this.waiters.add(wake);
        wakeNow = wake;
      });
      if (closed) return;
    }
  }

  private changes(user: string, device: string, after: number | undefined, filter: any): { any: boolean; body: Record<string, unknown> } {
    const limit = Number(filter?.room?.timeline?.limit ?? 10);
    const types: string[] | undefined = Array.isArray(filter?.room?.timeline?.types) ? filter.room.timeline.types : undefined;
    const join: Record<string, unknown> = {};
    const invite: Record<string, unknown> = {};
    const leave: Record<string, unknown> = {};
    const from = after ?? 0;
    for (const room of this.rooms.values()) {
      const member = room.members.get(user);
      if (!member) continue;
      if (member.membership === 'invite' && member.pos > from) {
        const stripped = this.stream.filter((entry) => entry.room === room.id && typeof entry.event.state_key === 'string'
          && ['m.room.create', 'm.room.encryption', 'm.room.name', 'm.room.join_rules'].includes(entry.event.type))
          .map(({ event }) => ({ type: event.type, state_key: event.state_key, content: event.content, sender: event.sender }));
        const invited = this.stream[member.pos - 1]!.event;
        stripped.push({ type: 'm.room.member', state_key: user, content: invited.content, sender: invited.sender });
        invite[room.id] = { invite_state: { events: stripped } };
        continue;
      }
      if (member.membership === 'leave') {
        if (after !== undefined && member.pos > from) leave[room.id] = { timeline: { events: [this.stream[member.pos - 1]!.event] } };
        continue;
      }
      if (member.membership !== 'join') continue;
      const joinedAt = this.joinedAt(room, user);
      const all = this.stream.filter((entry) => entry.room === room.id && entry.pos > from && entry.pos >= joinedAt && (!types || types.includes(entry.event?.type)));
      if (!all.length) continue;
      const shown = all.slice(-limit);
      const membersChanged = all.some((entry) => entry.event?.type === 'm.room.member');
      // A room first shown to the user (joined since `after`) comes with its state from before the timeline.
      const stateTypes: string[] | undefined = Array.isArray(filter?.room?.state?.types) ? filter.room.state.types : undefined;
      const state = joinedAt > from ? this.stateBefore(room.id, shown[0]!.pos).filter((event) => !stateTypes || stateTypes.includes(event.type)) : [];
      join[room.id] = {
        timeline: { events: shown.map((entry) => entry.event), limited: shown.length < all.length, prev_batch: `s${shown[0]!.pos - 1}` },
        state: { events: state },
        ...(membersChanged ? { summary: { 'm.joined_member_count': [...room.members.values()].filter((m) => m.membership === 'join').length } } : {}),
      };
    }
    const slot = `${user}\n${device}`;
    const acked = Math.max(this.acked.get(slot) ?? 0, from);
    const toDevice = this.stream.filter((entry) => entry.to === slot && entry.pos > acked).map((entry) => entry.event);
    const changed = after === undefined ? [] : [...new Set(this.stream.filter((entry) => entry.keysOf && entry.pos > from && this.shareRoom(user, entry.keysOf)).map((entry) => entry.keysOf!))];
    const fallback = this.fallbackKeys.get(slot);
    const any = Object.keys(join).length + Object.keys(invite).length + Object.keys(leave).length + toDevice.length + changed.length > 0;
    return {
      any,
      body: {
        next_batch: `s${this.stream.length}`, rooms: { join, invite, leave }, presence: { events: [] }, account_data: { events: [] },
        to_device: { events: toDevice }, device_lists: { changed, left: [] },
        device_one_time_keys_count: { signed_curve25519: this.oneTimeKeys.get(slot)?.size ?? 0 },
        device_unused_fallback_key_types: fallback && !fallback.used ? [fallback.id.split(':')[0]] : [],
      },
    };
  }

  /** A room's state just before a stream position: the last event of each type and state key. */
  private stateBefore(room: string, pos: number): Record<string, any>[] {
    const state = new Map<string, Record<string, any>>();
    for (const entry of this.stream) {
      if (entry.pos >= pos) break;
      if (entry.room === room && typeof entry.event?.state_key === 'string') state.set(`${entry.event.type}\n${entry.event.state_key}`, entry.event);
    }
    return [...state.values()];
  }

  /** Where the user's current stay in the room began (their join event). */
  private joinedAt(room: Room, user: string): number {
    return room.members.get(user)?.pos ?? Number.POSITIVE_INFINITY;
  }
}

/** What a client that encrypts does with each sync before its rooms are read, and with each encrypted event. */
export interface PersonCrypto {
  sync(sync: Record<string, any>): Promise<void>;
  decrypt(room: string, event: Record<string, any>): Promise<Record<string, any>>;
}

/** A person on the homeserver, speaking over the client-server API as their client would, and reading their own /sync. */
export class MatrixPerson {
  readonly userId: string;
  readonly deviceId: string;
  /** Set by a client that encrypts (see matrix-crypto.ts), before the first sync comes back. */
  crypto?: PersonCrypto;
  private readonly token: string;
  private readonly hs: Homeserver;
  /** Every timeline event of others the person's sync brought, by room. */
  readonly received: Record<string, any>[] = [];
  private since?: string;
  private readonly abort = new AbortController();
  private readonly loop: Promise<void>;
  private serial = 0;

  constructor(hs: Homeserver, localpart: string) {
    this.hs = hs;
    const { userId, token, deviceId } = hs.register(localpart);
    this.userId = userId;
    this.token = token;
    this.deviceId = deviceId;
    this.loop = this.syncing();
  }

  async api<T = any>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> {
    const response = await fetch(`${this.hs.peopleUrl}/_matrix${path}`, {
      method, headers: { authorization: `Bearer ${this.token}`, 'content-type': 'application/json' }, ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: response.status, body: await response.json() as T };
  }

  private async syncing(): Promise<void> {
    while (!this.abort.signal.aborted) {
      try {
        const response = await fetch(`${this.hs.peopleUrl}/_matrix/client/v3/sync?timeout=5000&filter=${encodeURIComponent('{"room":{"timeline":{"limit":500}}}')}${this.since ? `&since=${this.since}` : ''}`, { headers: { authorization: `Bearer ${this.token}` }, signal: this.abort.signal });
        const sync = await response.json() as any;
        if (!response.ok) throw new Error(sync.error);
        await this.crypto?.sync(sync);
        for (const [room, joined] of Object.entries<any>(sync.rooms?.join ?? {})) {
          for (const event of joined.timeline?.events ?? []) {
            if (!event || typeof event !== 'object' || Array.isArray(event) || event.sender === this.userId) continue;
            const shown = event.type === 'm.room.encrypted' && this.crypto ? await this.crypto.decrypt(room, event) : event;
            this.received.push({ ...shown, room_id: room });
          }
        }
        this.since = sync.next_batch;
      } catch {
        if (this.abort.signal.aborted) return;
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    }
  }

  /** Starts a direct chat with `other` (invited, is_direct), as Element does; without `encrypted`, unencrypted. */
  async directChat(other: string, options: { encrypted?: boolean } = {}): Promise<string> {
    const made = await this.api<{ room_id: string }>('POST', '/client/v3/createRoom', {
      is_direct: true, invite: [other], preset: 'trusted_private_chat',
      ...(options.encrypted ? { initial_state: [{ type: 'm.room.encryption', state_key: '', content: { algorithm: 'm.megolm.v1.aes-sha2' } }] } : {}),
    });
    if (made.status !== 200) throw new Error(`createRoom: ${JSON.stringify(made.body)}`);
    return made.body.room_id;
  }

  async say(room: string, text: string, content: Record<string, unknown> = {}): Promise<string> {
    const sent = await this.api<{ event_id: string }>('PUT', `/client/v3/rooms/${encodeURIComponent(room)}/send/m.room.message/t${Date.now()}.${++this.serial}`, { msgtype: 'm.text', body: text, ...content });
    if (sent.status !== 200) throw new Error(`send: ${JSON.stringify(sent.body)}`);
    return sent.body.event_id;
  }

  async join(room: string): Promise<void> {
    const joined = await this.api('POST', `/client/v3/join/${encodeURIComponent(room)}`, {});
    if (joined.status !== 200) throw new Error(`join: ${JSON.stringify(joined.body)}`);
  }

  async upload(bytes: Buffer, type: string): Promise<string> {
    const response = await fetch(`${this.hs.peopleUrl}/_matrix/media/v3/upload`, { method: 'POST', headers: { authorization: `Bearer ${this.token}`, 'content-type': type }, body: bytes });
    return ((await response.json()) as { content_uri: string }).content_uri;
  }

  /** A file of the media store (mxc://<server>/<id>), fetched as a client does (authenticated media). */
  async download(mxc: string): Promise<Buffer> {
    const [, server, id] = /^mxc:\/\/([^/]+)\/(.+)$/.exec(mxc) ?? [];
    const response = await fetch(`${this.hs.peopleUrl}/_matrix/client/v1/media/download/${encodeURIComponent(server!)}/${encodeURIComponent(id!)}`, { headers: { authorization: `Bearer ${this.token}` } });
    if (!response.ok) throw new Error(`download ${mxc}: HTTP ${response.status}`);
    return Buffer.from(await response.arrayBuffer());
  }

  /** The first message in the room from someone else matching `pattern`, after the first `after` received. */
  async waitFor(room: string, pattern: RegExp, options: { after?: number; timeoutMs?: number; from?: string } = {}): Promise<Record<string, any>> {
    const until = Date.now() + (options.timeoutMs ?? 15_000);
    for (;;) {
      const found = this.received.slice(options.after ?? 0).find((event) => event.room_id === room && event.type === 'm.room.message'
        && (!options.from || event.sender === options.from) && typeof event.content?.body === 'string' && pattern.test(event.content.body));
      if (found) return found;
      if (Date.now() > until) throw new Error(`${this.userId} did not get ${pattern} in ${room}; got: ${JSON.stringify(this.received.filter((event) => event.room_id === room).map((event) => event.content?.body ?? (event.error ? `${event.type} (${event.error})` : event.type)))}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  /** Messages in the room from `from`. */
  messagesFrom(room: string, from: string): string[] {
    return this.received.filter((event) => event.room_id === room && event.sender === from && event.type === 'm.room.message').map((event) => String(event.content?.body));
  }

  async quit(): Promise<void> {
    this.abort.abort();
    await this.loop;
  }
}
