/**
 * Matrix over the client-server API (https://spec.matrix.org/v1.11/client-server-api/),
 * over node:http and node:https (Node's fetch loads undici, about 17 MB of an
 * idle daemon's memory): one long-polled /sync per account, its access token from the
 * secret store. The sync token is kept in the profile's database only after
 * every event it covers is stored, so a daemon that stops anywhere reads
 * again from where it left off (an event stored already is known by its id).
 *
 * A room of two is a direct chat with the other member; a room named in
 * `rooms` (or any room, with "*") is a group room, answered when the account
 * is mentioned. Invites are accepted from senders who may talk (allowFrom,
 * approved); the others wait, with a pairing request for the operator, and
 * are joined once approved. End-to-end encrypted rooms are refused with the
 * reason: no prebuilt crypto module installs from the npm registry here.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { isLoopbackAddress } from '../../../shared/config/exposure.ts';
import { ChannelSendError, type Channel, type ChannelSettings, type InboundAttachment, type InboundMessage, type SendOptions, type SendReceipt } from '../../kernel/channel.ts';
import { AccountChannel, AccountConnection } from '../account-channel.ts';
import { accountsOf, settingPath } from '../accounts.ts';
import { TooLarge } from '../attachments.ts';
import { agentFor } from '../../kernel/upstream-fetch.ts';
import { mentionPattern, splitMessage, withoutMention } from '../formatting.ts';

/** Longest text sent in one event (an event is at most 64 KiB of JSON, escapes included). */
export const MATRIX_LIMIT = 8000;
const MAX_INBOUND_CHARS = 16_384;
/** How long a /sync waits on the homeserver for something to happen. */
const POLL_MS = 30_000;
/** How often invites waiting for their sender's approval are looked at again. */
const RECHECK_MS = 15_000;
/** Invites kept waiting at most (the oldest are forgotten first). */
const MAX_WAITING_INVITES = 200;
const ENCRYPTED_REASON = 'This gateway cannot read end-to-end encrypted rooms: invite it to a room without encryption.';
const ENCRYPTED_NOTICE = 'This room is end-to-end encrypted, and this gateway cannot read encrypted messages. Write to it in a room without encryption.';
const TIMELINE_TYPES = ['m.room.message', 'm.room.encrypted', 'm.room.encryption', 'm.room.member'];
/** Events of a room read back after a sync could not hold them all (a room busy while the account was away), at most. */
const MAX_BACKFILL = 2000;
/** What /sync returns: messages, memberships and encryption; no presence, receipts or account data. */
const FILTER = JSON.stringify({
  presence: { not_types: ['*'] },
  account_data: { not_types: ['*'] },
  room: {
    timeline: { limit: 100, types: TIMELINE_TYPES },
    state: { types: ['m.room.encryption', 'm.room.member'], lazy_load_members: true },
    ephemeral: { not_types: ['*'] },
    account_data: { not_types: ['*'] },
  },
});

interface MatrixAccountSettings { enabled: boolean; homeserver?: string; userId?: string; rooms: string[] }

/** The accounts of a Matrix channel's settings: the top level (its homeserver) and each of `accounts`. */
export function matrixAccounts(settings: ChannelSettings): Map<string, MatrixAccountSettings> {
  return accountsOf<MatrixAccountSettings>(settings, {
    keys: ['homeserver', 'userId', 'rooms'], inherited: { homeserver: true }, defaults: { rooms: [] }, hasDefault: (top) => Boolean(top.homeserver),
  });
}

const secretFor = (channelId: string, account: string) => settingPath(channelId, account, 'accessToken');
const USER_ID = /^@[^:\s]+:[^\s]+$/;
const ROOM = /^[!#][^:\s]+:[^\s]+$/;

/** Where the account left off: the sync token, and the invites waiting for their sender's approval. */
interface Cursor { since?: string; waiting?: Record<string, Waiting> }
interface Waiting { sender: string; at: number; direct?: boolean }

/** An event as /sync hands it over; nothing in it is trusted to have the shape the specification gives. */
interface RawEvent { type?: unknown; sender?: unknown; event_id?: unknown; state_key?: unknown; origin_server_ts?: unknown; content?: unknown }
type Content = Record<string, unknown>;

class Refused extends Error {}
class SyncTokenUnknown extends Error {}

class MatrixError extends Error {
  readonly status: number;
  readonly errcode?: string;
  readonly retryAfterMs?: number;

  constructor(status: number, errcode: string | undefined, message: string, retryAfterMs?: number) {
    super(message);
    this.status = status;
    this.errcode = errcode;
    this.retryAfterMs = retryAfterMs;
  }
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);
const events = (holder: unknown): RawEvent[] => (isObject(holder) && Array.isArray(holder.events) ? holder.events.filter(isObject) as RawEvent[] : []);
/** The most of a JSON answer read (a first sync of a large account is several megabytes). */
const MAX_ANSWER_BYTES = 64 * 1024 * 1024;

interface Answer { status: number; headers: IncomingHttpHeaders; body: Buffer }

/**
 * One HTTP request over node:http or node:https on the kept-alive agents
 * upstreams share; the answer read whole, up to `maxBytes` (TooLarge past
 * it). A connection that closes before the answer's end is an error.
 */
function request(method: string, url: URL, headers: Record<string, string>, body: string | undefined, signal: AbortSignal, maxBytes: number): Promise<Answer> {
  const http = process.getBuiltinModule(url.protocol === 'https:' ? 'node:https' : 'node:http') as typeof import('node:http');
  return new Promise((resolve, reject) => {
    const sent = http.request(url, {
      method, agent: agentFor(url.protocol), signal,
      headers: { accept: 'application/json', ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) }) },
    }, (response) => {
      const announced = Number(response.headers['content-length']);
      if (Number.isFinite(announced) && announced > maxBytes) {
        response.destroy();
        reject(new TooLarge(maxBytes));
        return;
      }
      const chunks: Buffer[] = [];
      let total = 0;
      response.on('data', (chunk: Buffer) => {
        total += chunk.length;
        if (total > maxBytes) {
          response.destroy();
          reject(new TooLarge(maxBytes));
          return;
        }
        chunks.push(chunk);
      });
      response.on('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body: Buffer.concat(chunks, total) }));
      response.on('error', reject);
      response.on('close', () => {
        if (!response.complete) reject(new Error('the connection closed before the answer ended'));
      });
    });
    sent.on('error', reject);
    sent.end(body);
  });
}

/**
 * A reply's text without the quote of the message it answers: clients put
 * one before the text ("> <@alice:example.org> what was said", a blank line)
 * for readers that do not show replies.
 */
export function withoutReplyFallback(body: string, isReply: boolean): string {
  if (!isReply || !body.startsWith('> ')) return body;
  const lines = body.split('\n');
  let index = 0;
  while (index < lines.length && lines[index]!.startsWith('>')) index++;
  return lines.slice(index).join('\n').replace(/^\n+/, '');
}

/** Where a homeserver is; an access token goes over plain http only to one on this host. */
export function homeserverOf(address: string | undefined): URL {
  if (!address) throw new Refused('set the homeserver: gateway config set channels.matrix.homeserver https://matrix.example.org');
  const url = new URL(address);
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new Refused(`the homeserver must be an https:// address (got ${url.protocol})`);
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (url.protocol === 'http:' && !(isLoopbackAddress(host) || host === 'localhost')) {
    throw new Refused('the homeserver must be an https:// address: over http the access token would cross the network in the clear (http is taken only for a homeserver on this host)');
  }
  return url;
}

class MatrixAccount extends AccountConnection<MatrixAccountSettings> {
  private stopped = false;
  /** Whether the token is known good and the rooms joined: syncing may go on. */
  private ready = false;
  private token?: string;
  private homeserver?: URL;
  private me?: string;
  private displayName?: string;
  private cursor: Cursor = {};
  private abort?: AbortController;
  private loop?: Promise<void>;
  private lastRecheck = 0;
  /** After a failure, the next sync asks without waiting: the account knows at once whether the homeserver is back. */
  private quick = false;
  /** Joined members of each room seen, learned when first needed, forgotten when its membership changes. */
  private readonly members = new Map<string, number>();
  /** Configured rooms by alias, as their ids. */
  private readonly aliases = new Map<string, string>();
  private readonly encrypted = new Set<string>();
  private readonly toldEncrypted = new Set<string>();
  /** Each person's direct room, as last written in. */
  private readonly direct = new Map<string, string>();

  get selfName(): string | undefined {
    return this.status.state === 'connected' ? this.me : undefined;
  }

  start(): void {
    this.loop = this.run();
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      try {
        if (!this.ready) await this.setUp();
        await this.syncOnce();
        this.reconnect.succeeded();
      } catch (error) {
        if (this.stopped) return;
        await this.failed(error);
      }
    }
  }

  /** Waits before trying again: the homeserver's own wait, backoff, or (a refused token or setting) the longest wait. */
  private async failed(error: unknown): Promise<void> {
    const max = this.reconnect.longest;
    let wait = this.reconnect.next();
    let detail = error instanceof Error ? error.message : String(error);
    if (error instanceof Refused) {
      this.ready = false;
      this.setState('error', detail);
      wait = max;
    } else if (error instanceof MatrixError && (error.errcode === 'M_UNKNOWN_TOKEN' || error.errcode === 'M_MISSING_TOKEN' || error.status === 401)) {
      this.ready = false;
      detail = `the homeserver refused the access token (${error.message}); set a valid one: gateway secrets set ${secretFor(this.channelId, this.name)}`;
      this.setState('error', detail);
      wait = max;
    } else if (error instanceof SyncTokenUnknown) {
      // The homeserver no longer knows where the account left off (its database restored, or the token damaged): it
      // starts again from now, as a new account does. What was said in between is not read.
      this.ready = false;
      this.cursor.since = undefined;
      await this.saveCursor().catch((saving: unknown) => this.log.warn({ err: saving }, 'matrix: the cleared sync token could not be stored'));
      wait = 0;
      detail = `the homeserver does not know the stored sync token (${error.message}); reading from now on`;
      this.setState('connecting', detail);
    } else {
      if (error instanceof MatrixError && error.retryAfterMs !== undefined) wait = error.retryAfterMs;
      if (!(error instanceof MatrixError)) detail = `cannot reach the homeserver: ${detail}`;
      // Connected before, and not refused: it is reconnecting, and says why.
      this.setState(this.ready ? 'connecting' : 'disconnected', detail);
    }
    this.quick = true;
    this.log.warn({ error: detail, retryInMs: wait }, 'matrix account not syncing; retrying');
    await this.reconnect.wait(wait);
  }

  /** A client-server API call; a refusal comes back as a MatrixError with the homeserver's errcode and wait. */
  private async api<T>(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
    const response = await request(method, new URL(`/_matrix/client${path}`, this.homeserver), { authorization: `Bearer ${this.token}` },
      body === undefined ? undefined : JSON.stringify(body), signal ?? AbortSignal.timeout(30_000), MAX_ANSWER_BYTES);
    const ok = response.status >= 200 && response.status < 300;
    let payload: unknown;
    try {
      payload = response.body.length ? JSON.parse(response.body.toString('utf8')) : {};
    } catch {
      throw new MatrixError(response.status, undefined, `the homeserver answered ${response.status} with something that is not JSON`);
    }
    if (!ok) {
      const problem = isObject(payload) ? payload : {};
      const retry = typeof problem.retry_after_ms === 'number' ? problem.retry_after_ms : Number(response.headers['retry-after']) * 1000 || undefined;
      throw new MatrixError(response.status, typeof problem.errcode === 'string' ? problem.errcode : undefined,
        `${typeof problem.errcode === 'string' ? `${problem.errcode}: ` : ''}${typeof problem.error === 'string' ? problem.error.slice(0, 300) : `HTTP ${response.status}`}`,
        response.status === 429 ? Math.max(0, Math.min(retry ?? 5000, 3_600_000)) : undefined);
    }
    if (!isObject(payload)) throw new MatrixError(response.status, undefined, 'the homeserver answered with JSON that is not an object');
    return payload as T;
  }

  /** Reads the token, asks the homeserver who it belongs to, joins the configured rooms, and (first time only) skips the history. */
  private async setUp(): Promise<void> {
    const settings = this.settings();
    this.homeserver = homeserverOf(settings?.homeserver);
    this.setState('connecting');
    const token = await this.context.secret(secretFor(this.channelId, this.name));
    if (!token) throw new Refused(`no access token: printf %s "$TOKEN" | gateway secrets set ${secretFor(this.channelId, this.name)}`);
    this.token = token;
    const whoami = await this.api<{ user_id?: unknown }>('GET', '/v3/account/whoami');
    if (typeof whoami.user_id !== 'string' || !USER_ID.test(whoami.user_id)) throw new MatrixError(200, undefined, 'the homeserver did not say whose access token this is');
    if (settings?.userId && settings.userId !== whoami.user_id) {
      throw new Refused(`the access token is ${whoami.user_id}'s, not ${settings.userId}'s: set the right token, or userId`);
    }
    this.me = whoami.user_id;
    const profile = await this.api<{ displayname?: unknown }>('GET', `/v3/profile/${encodeURIComponent(this.me)}/displayname`).catch(() => ({ displayname: undefined }));
    this.displayName = typeof profile.displayname === 'string' && profile.displayname.trim() ? profile.displayname.trim() : undefined;
    this.cursor = await this.loadCursor();
    for (const room of settings?.rooms ?? []) {
      if (room === '*') continue;
      try {
        const joined = await this.api<{ room_id?: unknown }>('POST', `/v3/join/${encodeURIComponent(room)}`, {});
        if (typeof joined.room_id === 'string') this.aliases.set(room, joined.room_id);
      } catch (error) {
        if (error instanceof MatrixError && error.status === 401) throw error;
        this.log.warn({ room, error: (error as Error).message }, 'matrix: a configured room could not be joined');
      }
    }
    if (this.cursor.since === undefined) {
      // The first sync of a new account: what was said before is history, not turns; invites waiting are looked at.
      const first = await this.api<Record<string, unknown>>('GET', `/v3/sync?timeout=0&filter=${encodeURIComponent(FILTER)}`);
      if (typeof first.next_batch !== 'string') throw new MatrixError(200, undefined, 'the homeserver\'s sync had no next_batch');
      await this.handle(first, true);
      this.cursor.since = first.next_batch;
      await this.saveCursor();
    }
    this.ready = true;
    this.setState('connected', this.me);
  }

  private async loadCursor(): Promise<Cursor> {
    const stored = await this.context.cursor.get(this.name);
    if (!stored) return {};
    try {
      const cursor = JSON.parse(stored) as Cursor;
      return { ...(typeof cursor.since === 'string' ? { since: cursor.since } : {}), ...(isObject(cursor.waiting) ? { waiting: cursor.waiting } : {}) };
    } catch {
      return {};
    }
  }

  private saveCursor(): Promise<void> {
    return this.context.cursor.set(this.name, JSON.stringify(this.cursor));
  }

  private async syncOnce(): Promise<void> {
    this.abort = new AbortController();
    const signal = AbortSignal.any([this.abort.signal, AbortSignal.timeout(POLL_MS + 30_000)]);
    const sync = await this.api<Record<string, unknown>>('GET', `/v3/sync?timeout=${this.quick ? 0 : POLL_MS}&since=${encodeURIComponent(this.cursor.since ?? '')}&filter=${encodeURIComponent(FILTER)}`, undefined, signal)
      .catch((error: unknown) => {
        throw error instanceof MatrixError && error.status === 400 && (error.errcode === 'M_INVALID_PARAM' || error.errcode === 'M_UNKNOWN') ? new SyncTokenUnknown(error.message) : error;
      });
    if (typeof sync.next_batch !== 'string') throw new MatrixError(200, undefined, 'the homeserver\'s sync had no next_batch');
    this.quick = false;
    if (this.status.state !== 'connected') this.setState('connected', this.me);
    const changed = await this.handle(sync, false);
    if (Date.now() - this.lastRecheck > RECHECK_MS) await this.recheckWaiting();
    // Everything the token covers is stored: it is kept now, and the next sync starts after it.
    if (sync.next_batch !== this.cursor.since || changed) {
      this.cursor.since = sync.next_batch;
      await this.saveCursor();
    }
  }

  /** What a sync brought: rooms left, invites, then each joined room's events in order. Returns whether waiting invites changed. */
  private async handle(sync: Record<string, unknown>, history: boolean): Promise<boolean> {
    const rooms = isObject(sync.rooms) ? sync.rooms : {};
    let changed = false;
    for (const roomId of Object.keys(isObject(rooms.leave) ? rooms.leave : {})) {
      this.members.delete(roomId);
      if (this.cursor.waiting?.[roomId]) {
        delete this.cursor.waiting[roomId];
        changed = true;
      }
    }
    for (const [roomId, room] of Object.entries(isObject(rooms.invite) ? rooms.invite : {})) {
      if (await this.invited(roomId, events(isObject(room) ? room.invite_state : undefined))) changed = true;
    }
    for (const [roomId, room] of Object.entries(isObject(rooms.join) ? rooms.join : {})) {
      if (!isObject(room)) continue;
      for (const event of [...events(room.state), ...events(room.timeline)]) {
        if (event.type === 'm.room.encryption') this.encrypted.add(roomId);
        if (event.type === 'm.room.member') this.members.delete(roomId);
      }
      if (history) continue;
      const timeline = isObject(room.timeline) ? room.timeline : {};
      if (timeline.limited === true && typeof timeline.prev_batch === 'string') {
        for (const event of await this.backfill(roomId, timeline.prev_batch)) await this.event(roomId, event);
      }
      for (const event of events(timeline)) await this.event(roomId, event);
    }
    return changed;
  }

  /**
   * The events a limited timeline left out, oldest first: read back from
   * before the sync's first event to where the last sync ended (what was
   * stored already is known by its id).
   */
  private async backfill(roomId: string, prevBatch: string): Promise<RawEvent[]> {
    const older: RawEvent[] = [];
    const filter = encodeURIComponent(JSON.stringify({ types: TIMELINE_TYPES }));
    let from = prevBatch;
    while (older.length < MAX_BACKFILL) {
      const page = await this.api<{ chunk?: unknown; end?: unknown }>('GET',
        `/v3/rooms/${encodeURIComponent(roomId)}/messages?dir=b&limit=100&from=${encodeURIComponent(from)}${this.cursor.since ? `&to=${encodeURIComponent(this.cursor.since)}` : ''}&filter=${filter}`);
      const chunk = Array.isArray(page.chunk) ? page.chunk.filter(isObject) as RawEvent[] : [];
      older.push(...chunk);
      if (!chunk.length || typeof page.end !== 'string' || page.end === from) break;
      from = page.end;
    }
    if (older.length >= MAX_BACKFILL) this.log.warn({ room: roomId, read: older.length }, 'matrix: a room said more while the account was away than it reads back; the oldest of it is not read');
    return older.reverse();
  }

  /** An invite: joined when its sender may talk, refused for an encrypted room, else kept waiting (and a pairing request made). */
  private async invited(roomId: string, state: RawEvent[]): Promise<boolean> {
    const mine = state.find((event) => event.type === 'm.room.member' && event.state_key === this.me && isObject(event.content) && event.content.membership === 'invite');
    const sender = typeof mine?.sender === 'string' && USER_ID.test(mine.sender) ? mine.sender : undefined;
    if (!sender || this.cursor.waiting?.[roomId]) return false;
    // A direct chat, as the inviting client says (`is_direct`): the person's room from then on.
    const direct = isObject(mine!.content) && mine!.content.is_direct === true;
    if (state.some((event) => event.type === 'm.room.encryption')) {
      this.log.warn({ room: roomId, sender }, 'matrix: an invite to an encrypted room refused');
      await this.api('POST', `/v3/rooms/${encodeURIComponent(roomId)}/leave`, { reason: ENCRYPTED_REASON }).catch((error: unknown) => this.log.warn({ err: error }, 'matrix: could not refuse an invite'));
      return false;
    }
    const verdict = await this.context.admit({ account: this.name, sender, senderName: sender, ask: true });
    if (verdict === 'allowed') {
      await this.join(roomId, sender, direct);
      return false;
    }
    this.log.info({ room: roomId, sender, verdict }, 'matrix: an invite waits for its sender to be approved');
    const waiting = { ...this.cursor.waiting, [roomId]: { sender, at: Date.now(), ...(direct ? { direct } : {}) } };
    const kept = Object.entries(waiting).sort(([, a], [, b]) => b.at - a.at).slice(0, MAX_WAITING_INVITES);
    this.cursor.waiting = Object.fromEntries(kept);
    return true;
  }

  private async join(roomId: string, sender: string, direct: boolean): Promise<void> {
    await this.api('POST', `/v3/rooms/${encodeURIComponent(roomId)}/join`, {});
    this.log.info({ room: roomId, sender, direct }, 'matrix: joined a room on its member\'s invite');
    if (direct) await this.rememberDirect(sender, roomId);
  }

  /** The account's own m.direct list (person to rooms), as clients keep it; an empty one when there is none yet. */
  private async directList(): Promise<Record<string, unknown>> {
    try {
      return await this.api<Record<string, unknown>>('GET', `/v3/user/${encodeURIComponent(this.me!)}/account_data/m.direct`);
    } catch (error) {
      if (error instanceof MatrixError && error.status === 404) return {};
      throw error;
    }
  }

  /** A person's direct room, known from now on and kept in the account's m.direct (so it is found again after a restart). */
  private async rememberDirect(person: string, roomId: string): Promise<void> {
    this.direct.set(person, roomId);
    try {
      const list = await this.directList();
      const rooms = Array.isArray(list[person]) ? (list[person] as unknown[]).filter((room) => typeof room === 'string' && room !== roomId) : [];
      await this.api('PUT', `/v3/user/${encodeURIComponent(this.me!)}/account_data/m.direct`, { ...list, [person]: [roomId, ...rooms].slice(0, 20) });
    } catch (error) {
      this.log.warn({ error: (error as Error).message }, 'matrix: could not note a direct room in m.direct');
    }
  }

  /** A person's direct room from the account's m.direct: the first of theirs the account is still in with them alone. */
  private async knownDirect(person: string): Promise<string | undefined> {
    const list = await this.directList().catch(() => ({}) as Record<string, unknown>);
    const rooms = Array.isArray(list[person]) ? (list[person] as unknown[]).filter((room): room is string => typeof room === 'string') : [];
    for (const room of rooms) {
      const members = await this.joinedMembers(room).catch(() => Number.NaN);
      if (members === 2) {
        this.direct.set(person, room);
        return room;
      }
    }
    return undefined;
  }

  /** Invites whose senders may talk now (approved since, or allowed by the config) are joined. */
  private async recheckWaiting(): Promise<void> {
    this.lastRecheck = Date.now();
    for (const [roomId, waiting] of Object.entries(this.cursor.waiting ?? {})) {
      if (await this.context.admit({ account: this.name, sender: waiting.sender, senderName: waiting.sender, ask: false }) !== 'allowed') continue;
      await this.acceptWaiting(roomId, waiting);
    }
  }

  private async acceptWaiting(roomId: string, waiting: Waiting): Promise<void> {
    try {
      await this.join(roomId, waiting.sender, waiting.direct === true);
    } catch (error) {
      // Withdrawn or gone: nothing to join any more. Anything else is tried again later.
      if (!(error instanceof MatrixError) || (error.status !== 403 && error.status !== 404)) throw error;
      this.log.info({ room: roomId, error: error.message }, 'matrix: a waiting invite is gone');
    }
    delete this.cursor.waiting?.[roomId];
    await this.saveCursor();
  }

  private async joinedMembers(roomId: string): Promise<number> {
    let count = this.members.get(roomId);
    if (count === undefined) {
      try {
        const joined = await this.api<{ joined?: unknown }>('GET', `/v3/rooms/${encodeURIComponent(roomId)}/joined_members`);
        count = isObject(joined.joined) ? Object.keys(joined.joined).length : 0;
      } catch (error) {
        // A room the account has left since: its events are not answered.
        if (error instanceof MatrixError && (error.status === 403 || error.status === 404)) return Number.NaN;
        throw error;
      }
      this.members.set(roomId, count);
    }
    return count;
  }

  /** One timeline event: a person's message becomes an inbound message; the rest is looked at and let go. */
  private async event(roomId: string, event: RawEvent): Promise<void> {
    if (typeof event.sender !== 'string' || typeof event.event_id !== 'string' || event.sender === this.me || !USER_ID.test(event.sender)) return;
    if (event.type === 'm.room.encrypted') {
      await this.tellEncrypted(roomId, event.sender);
      return;
    }
    if (event.type !== 'm.room.message' || !isObject(event.content)) return;
    const content = event.content;
    const relation = isObject(content['m.relates_to']) ? content['m.relates_to'] : {};
    // An edit is not a new turn; a notice is a bot speaking (never answered, so two bots do not talk forever).
    if (relation.rel_type === 'm.replace' || content.msgtype === 'm.notice' || typeof content.body !== 'string') return;
    const attachment = this.attachmentOf(content);
    let text = withoutReplyFallback(content.body, isObject(relation['m.in_reply_to']));
    if (attachment) text = typeof content.filename === 'string' && content.filename !== content.body ? text : '';
    if (content.msgtype === 'm.emote') text = `* ${event.sender} ${text}`;
    if (!text.trim() && !attachment) return;
    if (text.length > MAX_INBOUND_CHARS) text = text.slice(0, MAX_INBOUND_CHARS);
    const at = typeof event.origin_server_ts === 'number' && Number.isFinite(event.origin_server_ts) ? event.origin_server_ts : Date.now();
    const base = { account: this.name, sender: event.sender, senderName: event.sender, text, at, platformId: event.event_id, ...(attachment ? { attachments: [attachment] } : {}) };
    const rooms = this.settings()?.rooms ?? [];
    const configured = rooms.includes(roomId) || [...this.aliases].some(([alias, id]) => id === roomId && rooms.includes(alias));
    const members = configured ? Number.POSITIVE_INFINITY : await this.joinedMembers(roomId);
    if (Number.isNaN(members)) return;
    if (members <= 2) {
      this.direct.set(event.sender, roomId);
      await this.context.inbound({ ...base, kind: 'direct', replyTo: roomId });
      return;
    }
    if (!configured && !rooms.includes('*')) {
      this.log.debug({ room: roomId }, 'message in a Matrix room the agent may not answer in (channels.<id>.rooms); skipped');
      return;
    }
    const message: InboundMessage = { ...base, kind: 'group', room: roomId, replyTo: roomId };
    const addressed = this.addressed(content, text);
    await this.context.inbound(addressed === undefined ? message : { ...message, addressed: { text: addressed } });
  }

  /** A room message's text for the agent when it mentions the account (m.mentions, its user id, or its name leading the text); else undefined. */
  private addressed(content: Content, text: string): string | undefined {
    const me = this.me!;
    const mentions = isObject(content['m.mentions']) && Array.isArray(content['m.mentions'].user_ids) ? content['m.mentions'].user_ids : [];
    const names = [me, ...(this.displayName ? [this.displayName] : []), me.slice(1, me.indexOf(':'))];
    const pattern = mentionPattern(names);
    if (!mentions.includes(me) && !pattern.test(text)) return undefined;
    return withoutMention(text, pattern) || text;
  }

  /** A file sent in the room (m.image, m.file, m.audio, m.video): fetched from the homeserver's media store, with the token. */
  private attachmentOf(content: Content): InboundAttachment | undefined {
    if (!['m.image', 'm.file', 'm.audio', 'm.video'].includes(content.msgtype as string) || typeof content.url !== 'string') return undefined;
    const mxc = /^mxc:\/\/([A-Za-z0-9.:[\]-]+)\/([A-Za-z0-9_-]+)$/.exec(content.url);
    if (!mxc) return undefined;
    const info = isObject(content.info) ? content.info : {};
    const name = typeof content.filename === 'string' ? content.filename : typeof content.body === 'string' && content.body ? content.body : 'file';
    return {
      name: name.slice(0, 255),
      mimeType: typeof info.mimetype === 'string' ? info.mimetype : undefined,
      size: typeof info.size === 'number' ? info.size : undefined,
      fetch: async (maxBytes, signal) => {
        const path = `${encodeURIComponent(mxc[1]!)}/${encodeURIComponent(mxc[2]!)}`;
        const headers = { authorization: `Bearer ${this.token}`, accept: '*/*' };
        let response = await request('GET', new URL(`/_matrix/client/v1/media/download/${path}`, this.homeserver), headers, undefined, signal, maxBytes);
        // A homeserver from before authenticated media (Matrix 1.11) serves files at the older address.
        if (response.status === 404 || response.status === 400) {
          response = await request('GET', new URL(`/_matrix/media/v3/download/${path}`, this.homeserver), headers, undefined, signal, maxBytes);
        }
        if (response.status < 200 || response.status >= 300) throw new Error(`the homeserver answered ${response.status} for the file`);
        return response.body;
      },
    };
  }

  /** Says once per room (per start) that encrypted messages cannot be read, and logs it. */
  private async tellEncrypted(roomId: string, sender: string): Promise<void> {
    this.encrypted.add(roomId);
    if (this.toldEncrypted.has(roomId)) return;
    this.toldEncrypted.add(roomId);
    this.log.warn({ room: roomId, sender }, 'matrix: an encrypted message cannot be read; the room was told');
    await this.api('PUT', `/v3/rooms/${encodeURIComponent(roomId)}/send/m.room.message/${randomUUID()}`, { msgtype: 'm.notice', body: ENCRYPTED_NOTICE })
      .catch((error: unknown) => this.log.warn({ error: (error as Error).message }, 'matrix: could not tell a room it is encrypted'));
  }

  /** The room a message goes to: a room id, an alias, or a person's direct room (joined from their waiting invite, or made). */
  private async roomFor(to: string): Promise<string> {
    const peer = to.trim();
    if (peer.startsWith('!')) return peer;
    if (peer.startsWith('#')) {
      let id = this.aliases.get(peer);
      if (!id) {
        const found = await this.api<{ room_id?: unknown }>('GET', `/v3/directory/room/${encodeURIComponent(peer)}`);
        if (typeof found.room_id !== 'string') throw new MatrixError(404, 'M_NOT_FOUND', `no room is named ${peer}`);
        id = found.room_id;
        this.aliases.set(peer, id);
      }
      return id;
    }
    const known = this.direct.get(peer);
    if (known) return known;
    const waiting = Object.entries(this.cursor.waiting ?? {}).find(([, invite]) => invite.sender === peer);
    if (waiting) {
      await this.acceptWaiting(waiting[0], waiting[1]);
      const joined = this.direct.get(peer);
      if (joined) return joined;
    }
    const found = await this.knownDirect(peer);
    if (found) return found;
    const made = await this.api<{ room_id?: unknown }>('POST', '/v3/createRoom', { is_direct: true, invite: [peer], preset: 'trusted_private_chat' });
    if (typeof made.room_id !== 'string') throw new MatrixError(200, undefined, 'the homeserver made no room');
    await this.rememberDirect(peer, made.room_id);
    return made.room_id;
  }

  async send(to: string, text: string, options: SendOptions = {}): Promise<SendReceipt> {
    if (!this.ready || this.status.state !== 'connected') throw new ChannelSendError(`${this.channelId} account ${this.name} is ${this.status.state}; the message was not sent`);
    try {
      const room = await this.roomFor(to);
      if (this.encrypted.has(room)) throw new ChannelSendError('the room is end-to-end encrypted; this gateway does not send into encrypted rooms', { permanent: true });
      // The homeserver takes a transaction id once: a retry of a message it took already is not posted twice.
      const txn = options.idempotencyKey ? options.idempotencyKey.replace(/[^A-Za-z0-9._~-]/g, '_').slice(0, 200) : randomUUID();
      const content = options.editOf
        ? { msgtype: 'm.text', body: `* ${text}`, 'm.new_content': { msgtype: 'm.text', body: text }, 'm.relates_to': { rel_type: 'm.replace', event_id: options.editOf } }
        : { msgtype: 'm.text', body: text, 'm.mentions': {} };
      const sent = await this.api<{ event_id?: unknown }>('PUT', `/v3/rooms/${encodeURIComponent(room)}/send/m.room.message/${encodeURIComponent(options.editOf ? `${txn}.${randomUUID()}` : txn)}`, content);
      // An edit keeps the id of the message it edits: later edits go to that one.
      return { ids: [options.editOf ?? (typeof sent.event_id === 'string' ? sent.event_id : txn)] };
    } catch (error) {
      if (error instanceof ChannelSendError) throw error;
      if (error instanceof MatrixError) {
        if (error.retryAfterMs !== undefined) throw new ChannelSendError(`Matrix: ${error.message}`, { retryAfterMs: error.retryAfterMs });
        // Not in the room, no such room or person, an event the homeserver will never take: trying again cannot help.
        throw new ChannelSendError(`Matrix: ${error.message}`, { permanent: error.status === 400 || error.status === 403 || error.status === 404 || error.status === 413 });
      }
      throw new ChannelSendError(`cannot reach the homeserver: ${(error as Error)?.message ?? String(error)}`);
    }
  }

  async typing(to: string): Promise<void> {
    if (!this.ready || this.status.state !== 'connected') return;
    const room = await this.roomFor(to);
    await this.api('PUT', `/v3/rooms/${encodeURIComponent(room)}/typing/${encodeURIComponent(this.me!)}`, { typing: true, timeout: 10_000 });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.abort?.abort();
    this.reconnect.stop();
    await this.loop?.catch(() => undefined);
    this.setState('disconnected');
  }
}

export class MatrixChannel extends AccountChannel<MatrixAccount, MatrixAccountSettings> implements Channel {
  readonly edits = true;

  protected accountsOf(settings: ChannelSettings): Map<string, MatrixAccountSettings> {
    return matrixAccounts(settings);
  }

  protected open(name: string, settings: () => MatrixAccountSettings | undefined): MatrixAccount {
    const account = new MatrixAccount(this.id, name, settings, this.context);
    account.start();
    return account;
  }

  split(text: string): string[] {
    return splitMessage(text, MATRIX_LIMIT);
  }

  normalizePeer(peer: string): string {
    return peer.trim();
  }

  /** A room id (!...) or alias (#...) is a room; a person is their user id (@name:server). */
  isRoom(peer: string): boolean {
    return /^[!#]/.test(peer.trim());
  }

  checkPeer(peer: string): string | undefined {
    const value = peer.trim();
    return USER_ID.test(value) || ROOM.test(value) ? undefined : 'is not a Matrix user id (@name:example.org), room id (!id:example.org) or alias (#name:example.org)';
  }
}
