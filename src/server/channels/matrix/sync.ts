/**
 * Reading a Matrix account: one long-polled /sync after another, each event
 * a person wrote made an inbound message. The sync token is kept in the
 * profile's database only after every event it covers is stored, so a daemon
 * that stops anywhere reads again from where it left off (an event stored
 * already is known by its id). A timeline the homeserver cut short is read
 * back page by page.
 */
import type { Logger } from 'pino';
import type { ChannelContext, InboundAttachment, InboundMessage } from '../../kernel/channel.ts';
import { mentionPattern, withoutMention } from '../formatting.ts';
import { events, isObject, MatrixError, USER_ID, type Content, type RawEvent } from './api.ts';
import type { MatrixRooms, RoomsOwner } from './rooms.ts';

const MAX_INBOUND_CHARS = 16_384;
/** How long a /sync waits on the homeserver for something to happen. */
const POLL_MS = 30_000;
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

/** The homeserver no longer knows the sync token the account kept. */
export class SyncTokenUnknown extends Error {}

/** Where the account left off: the sync token, and the invites waiting for their sender's approval. */
interface Cursor { since?: string; waiting?: MatrixRooms['waiting'] }

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

/** What reading needs of its account, beyond what its rooms do. */
export interface SyncOwner extends RoomsOwner {
  displayName(): string | undefined;
  /** The rooms the account may answer in (channels.<id>.rooms). */
  rooms(): string[];
  context: Pick<ChannelContext, 'inbound' | 'cursor'>;
  /** A sync came back: the homeserver is reachable. */
  synced(): void;
}

export class MatrixSync {
  /** The sync token: everything before it is stored. */
  since?: string;
  /** After a failure, the next sync asks without waiting: the account knows at once whether the homeserver is back. */
  quick = false;
  private abort?: AbortController;
  private readonly owner: SyncOwner;
  private readonly rooms: MatrixRooms;

  constructor(owner: SyncOwner, rooms: MatrixRooms) {
    this.owner = owner;
    this.rooms = rooms;
  }

  private api<T>(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
    return this.owner.api().call<T>(method, path, body, signal);
  }

  private get log(): Logger {
    return this.owner.log();
  }

  /** Reads where the account left off (its sync token and waiting invites) from the profile's database. */
  async load(): Promise<void> {
    const stored = await this.owner.context.cursor.get(this.owner.name);
    let cursor: Cursor = {};
    try {
      const parsed = stored ? JSON.parse(stored) as Cursor : {};
      cursor = { ...(typeof parsed.since === 'string' ? { since: parsed.since } : {}), ...(isObject(parsed.waiting) ? { waiting: parsed.waiting } : {}) };
    } catch {
      cursor = {};
    }
    this.since = cursor.since;
    this.rooms.waiting = cursor.waiting;
  }

  save(): Promise<void> {
    const cursor: Cursor = { since: this.since, waiting: this.rooms.waiting };
    return this.owner.context.cursor.set(this.owner.name, JSON.stringify(cursor));
  }

  /** The first sync of a new account: what was said before is history, not turns; invites waiting are looked at. */
  async first(): Promise<void> {
    const first = await this.api<Record<string, unknown>>('GET', `/v3/sync?timeout=0&filter=${encodeURIComponent(FILTER)}`);
    if (typeof first.next_batch !== 'string') throw new MatrixError(200, undefined, 'the homeserver\'s sync had no next_batch');
    await this.handle(first, true);
    this.since = first.next_batch;
    await this.save();
  }

  /** One /sync: what it brought is stored, then the token kept. */
  async once(): Promise<void> {
    this.abort = new AbortController();
    const signal = AbortSignal.any([this.abort.signal, AbortSignal.timeout(POLL_MS + 30_000)]);
    const sync = await this.api<Record<string, unknown>>('GET', `/v3/sync?timeout=${this.quick ? 0 : POLL_MS}&since=${encodeURIComponent(this.since ?? '')}&filter=${encodeURIComponent(FILTER)}`, undefined, signal)
      .catch((error: unknown) => {
        throw error instanceof MatrixError && error.status === 400 && (error.errcode === 'M_INVALID_PARAM' || error.errcode === 'M_UNKNOWN') ? new SyncTokenUnknown(error.message) : error;
      });
    if (typeof sync.next_batch !== 'string') throw new MatrixError(200, undefined, 'the homeserver\'s sync had no next_batch');
    this.quick = false;
    this.owner.synced();
    const changed = await this.handle(sync, false);
    await this.rooms.recheckWaiting();
    // Everything the token covers is stored: it is kept now, and the next sync starts after it.
    if (sync.next_batch !== this.since || changed) {
      this.since = sync.next_batch;
      await this.save();
    }
  }

  /** Ends the sync waiting on the homeserver. */
  stop(): void {
    this.abort?.abort();
  }

  /** What a sync brought: rooms left, invites, then each joined room's events in order. Returns whether waiting invites changed. */
  private async handle(sync: Record<string, unknown>, history: boolean): Promise<boolean> {
    const rooms = isObject(sync.rooms) ? sync.rooms : {};
    let changed = false;
    for (const roomId of Object.keys(isObject(rooms.leave) ? rooms.leave : {})) {
      if (this.rooms.left(roomId)) changed = true;
    }
    for (const [roomId, room] of Object.entries(isObject(rooms.invite) ? rooms.invite : {})) {
      if (await this.rooms.invited(roomId, events(isObject(room) ? room.invite_state : undefined))) changed = true;
    }
    for (const [roomId, room] of Object.entries(isObject(rooms.join) ? rooms.join : {})) {
      if (!isObject(room)) continue;
      for (const event of [...events(room.state), ...events(room.timeline)]) this.rooms.saw(roomId, event);
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
        `/v3/rooms/${encodeURIComponent(roomId)}/messages?dir=b&limit=100&from=${encodeURIComponent(from)}${this.since ? `&to=${encodeURIComponent(this.since)}` : ''}&filter=${filter}`);
      const chunk = Array.isArray(page.chunk) ? page.chunk.filter(isObject) as RawEvent[] : [];
      older.push(...chunk);
      if (!chunk.length || typeof page.end !== 'string' || page.end === from) break;
      from = page.end;
    }
    if (older.length >= MAX_BACKFILL) this.log.warn({ room: roomId, read: older.length }, 'matrix: a room said more while the account was away than it reads back; the oldest of it is not read');
    return older.reverse();
  }

  /** One timeline event: a person's message becomes an inbound message; the rest is looked at and let go. */
  private async event(roomId: string, event: RawEvent): Promise<void> {
    const me = this.owner.me();
    if (typeof event.sender !== 'string' || typeof event.event_id !== 'string' || event.sender === me || !USER_ID.test(event.sender)) return;
    if (event.type === 'm.room.encrypted') {
      await this.rooms.tellEncrypted(roomId, event.sender);
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
    const base = { account: this.owner.name, sender: event.sender, senderName: event.sender, text, at, platformId: event.event_id, reference: event.event_id, ...(attachment ? { attachments: [attachment] } : {}) };
    // A thread is a conversation of its own, answered in the thread.
    const thread = relation.rel_type === 'm.thread' && typeof relation.event_id === 'string' ? relation.event_id : undefined;
    const where = thread ? { thread, replyTo: `${roomId}/${thread}` } : { replyTo: roomId };
    const rooms = this.owner.rooms();
    const configured = this.rooms.isConfigured(roomId, rooms);
    const members = configured ? Number.POSITIVE_INFINITY : await this.rooms.joinedMembers(roomId);
    if (Number.isNaN(members)) return;
    if (members <= 2) {
      this.rooms.noteDirect(event.sender, roomId);
      await this.owner.context.inbound({ ...base, kind: 'direct', ...where });
      return;
    }
    if (!configured && !rooms.includes('*')) {
      this.log.debug({ room: roomId }, 'message in a Matrix room the agent may not answer in (channels.<id>.rooms); skipped');
      return;
    }
    const message: InboundMessage = { ...base, kind: 'group', room: roomId, ...where };
    const addressed = this.addressed(content, text);
    await this.owner.context.inbound(addressed === undefined ? message : { ...message, addressed: { text: addressed } });
  }

  /** A room message's text for the agent when it mentions the account (m.mentions, its user id, or its name leading the text); else undefined. */
  private addressed(content: Content, text: string): string | undefined {
    const me = this.owner.me();
    const displayName = this.owner.displayName();
    const mentions = isObject(content['m.mentions']) && Array.isArray(content['m.mentions'].user_ids) ? content['m.mentions'].user_ids : [];
    const names = [me, ...(displayName ? [displayName] : []), me.slice(1, me.indexOf(':'))];
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
      fetch: (maxBytes, signal) => this.owner.api().download(mxc[1]!, mxc[2]!, maxBytes, signal),
    };
  }
}

