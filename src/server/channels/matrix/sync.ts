/**
 * Reading a Matrix account: one long-polled /sync after another, each event
 * a person wrote made an inbound message. The sync token is kept in the
 * profile's database only after every event it covers is stored, so a daemon
 * that stops anywhere reads again from where it left off (an event stored
 * already is known by its id). A timeline the homeserver cut short is read
 * back page by page.
 *
 * In an account that encrypts, what a sync brings for its device (to-device
 * room keys, device changes) goes to its encryption first and is kept there
 * before the room events are read; an encrypted event is read once made
 * clear. One whose key has not come yet waits, kept with the sync token, and
 * is read when the key comes; meanwhile the account's state says so.
 */
import type { Logger } from 'pino';
import type { ChannelContext, InboundAttachment, InboundMessage } from '../../kernel/channel.ts';
import { mentionPattern, withoutMention } from '../formatting.ts';
import { events, isObject, MatrixError, USER_ID, type Content, type RawEvent } from './api.ts';
import type { MatrixCrypto, Undecrypted } from './crypto.ts';
import type { MatrixRooms, RoomsOwner } from './rooms.ts';

const MAX_INBOUND_CHARS = 16_384;
/** How long a /sync waits on the homeserver for something to happen. */
const POLL_MS = 30_000;
const TIMELINE_TYPES = ['m.room.message', 'm.room.encrypted', 'm.room.encryption', 'm.room.member'];
/** Events of a room read back after a sync could not hold them all (a room busy while the account was away), at most. */
const MAX_BACKFILL = 2000;
/** Encrypted events waiting for their room key, at most, and for how long. */
const MAX_UNDECRYPTED = 200;
const UNDECRYPTED_MS = 7 * 24 * 3600_000;
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

/** An encrypted event waiting for the key it was encrypted with. */
interface Held { room: string; event: RawEvent; at: number; detail: string }

/** Where the account left off: the sync token, the invites waiting for their sender's approval, the encrypted events waiting for their keys. */
interface Cursor { since?: string; waiting?: MatrixRooms['waiting']; undecrypted?: Held[] }

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
  /** The account's encryption, when it encrypts. */
  crypto(): MatrixCrypto | undefined;
}

export class MatrixSync {
  /** The sync token: everything before it is stored. */
  since?: string;
  /** After a failure, the next sync asks without waiting: the account knows at once whether the homeserver is back. */
  quick = false;
  /** Encrypted events whose keys have not come yet, oldest first. */
  undecrypted: Held[] = [];
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
      cursor = {
        ...(typeof parsed.since === 'string' ? { since: parsed.since } : {}), ...(isObject(parsed.waiting) ? { waiting: parsed.waiting } : {}),
        ...(Array.isArray(parsed.undecrypted) ? { undecrypted: parsed.undecrypted.filter((held) => isObject(held) && typeof held.room === 'string' && isObject(held.event)) } : {}),
      };
    } catch {
      cursor = {};
    }
    this.since = cursor.since;
    this.rooms.waiting = cursor.waiting;
    this.undecrypted = cursor.undecrypted ?? [];
  }

  save(): Promise<void> {
    const cursor: Cursor = { since: this.since, waiting: this.rooms.waiting, ...(this.undecrypted.length ? { undecrypted: this.undecrypted } : {}) };
    return this.owner.context.cursor.set(this.owner.name, JSON.stringify(cursor));
  }

  /** The first sync of a new account: what was said before is history, not turns; invites waiting are looked at. */
  async first(): Promise<void> {
    const first = await this.api<Record<string, unknown>>('GET', `/v3/sync?timeout=0&filter=${encodeURIComponent(FILTER)}`);
    if (typeof first.next_batch !== 'string') throw new MatrixError(200, undefined, 'the homeserver\'s sync had no next_batch');
    await this.owner.crypto()?.receive(first);
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
    // Room keys and device changes first, kept before any event that needs them is read.
    const keysCame = await this.owner.crypto()?.receive(sync);
    const held = this.undecrypted.length;
    if (keysCame) await this.retryUndecrypted();
    let changed = await this.handle(sync, false);
    changed = this.forgetOldUndecrypted() || changed || this.undecrypted.length !== held;
    await this.rooms.recheckWaiting();
    this.owner.synced();
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
    const crypto = this.owner.crypto();
    for (const [roomId, room] of Object.entries(isObject(rooms.join) ? rooms.join : {})) {
      if (!isObject(room)) continue;
      for (const event of [...events(room.state), ...events(room.timeline)]) this.rooms.saw(roomId, event);
      // The devices of an encrypted room's members are followed, so that their keys are known before a message is sent there.
      if (crypto && this.rooms.needsTracking(roomId)) {
        const members = await this.rooms.memberIds(roomId);
        if (members) await crypto.track(members);
        this.rooms.trackedNow(roomId);
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
  private async event(roomId: string, given: RawEvent): Promise<void> {
    const me = this.owner.me();
    const { sender, event_id: eventId } = given;
    if (typeof sender !== 'string' || typeof eventId !== 'string' || sender === me || !USER_ID.test(sender)) return;
    let event = given;
    if (event.type === 'm.room.encrypted') {
      const crypto = this.owner.crypto();
      if (!crypto) {
        await this.rooms.tellEncrypted(roomId, sender);
        return;
      }
      const read = await crypto.decrypt(roomId, event);
      if ('undecrypted' in read) {
        // Waiting helps only a message whose key may still come; one that is broken (or forged) is logged and let go.
        if (read.undecrypted.reason === 'missing-keys') this.hold(roomId, event, read.undecrypted);
        else this.log.warn({ room: roomId, event: eventId, sender, detail: read.undecrypted.detail }, 'matrix: an encrypted message could not be decrypted; skipped');
        return;
      }
      event = read.clear;
    }
    if (event.type !== 'm.room.message' || !isObject(event.content)) return;
    const content = event.content;
    const relation = isObject(content['m.relates_to']) ? content['m.relates_to'] : {};
    // An edit is not a new turn; a notice is a bot speaking (never answered, so two bots do not talk forever).
    if (relation.rel_type === 'm.replace' || content.msgtype === 'm.notice' || typeof content.body !== 'string') return;
    const attachment = this.attachmentOf(content);
    let text = withoutReplyFallback(content.body, isObject(relation['m.in_reply_to']));
    if (attachment) text = typeof content.filename === 'string' && content.filename !== content.body ? text : '';
    if (content.msgtype === 'm.emote') text = `* ${sender} ${text}`;
    if (!text.trim() && !attachment) return;
    if (text.length > MAX_INBOUND_CHARS) text = text.slice(0, MAX_INBOUND_CHARS);
    const at = typeof event.origin_server_ts === 'number' && Number.isFinite(event.origin_server_ts) ? event.origin_server_ts : Date.now();
    const base = { account: this.owner.name, sender, senderName: sender, text, at, platformId: eventId, reference: eventId, ...(attachment ? { attachments: [attachment] } : {}) };
    // A thread is a conversation of its own, answered in the thread.
    const thread = relation.rel_type === 'm.thread' && typeof relation.event_id === 'string' ? relation.event_id : undefined;
    const where = thread ? { thread, replyTo: `${roomId}/${thread}` } : { replyTo: roomId };
    const rooms = this.owner.rooms();
    const configured = this.rooms.isConfigured(roomId, rooms);
    const members = configured ? Number.POSITIVE_INFINITY : await this.rooms.joinedMembers(roomId);
    if (Number.isNaN(members)) return;
    if (members <= 2) {
      this.rooms.noteDirect(sender, roomId);
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

  /** An encrypted event whose key has not come: it waits (once), and the account's state says so. */
  private hold(roomId: string, event: RawEvent, why: Undecrypted): void {
    if (this.undecrypted.some((held) => held.event.event_id === event.event_id)) return;
    this.log.warn({ room: roomId, event: event.event_id, sender: event.sender, reason: why.reason, detail: why.detail }, 'matrix: an encrypted message cannot be read yet; it waits for its key');
    this.undecrypted.push({ room: roomId, event, at: Date.now(), detail: why.detail.slice(0, 300) });
    if (this.undecrypted.length > MAX_UNDECRYPTED) {
      const dropped = this.undecrypted.splice(0, this.undecrypted.length - MAX_UNDECRYPTED);
      this.log.warn({ dropped: dropped.length }, 'matrix: too many encrypted messages wait for their keys; the oldest are given up');
    }
  }

  /** Room keys came: the events waiting for them are tried again, in the order they came. */
  private async retryUndecrypted(): Promise<void> {
    const waiting = this.undecrypted;
    this.undecrypted = [];
    for (const held of waiting) await this.event(held.room, held.event);
    // Those still waiting keep the time they first came.
    const since = new Map(waiting.map((held) => [held.event.event_id, held.at]));
    for (const held of this.undecrypted) held.at = since.get(held.event.event_id) ?? held.at;
  }

  /** Events that waited longer than UNDECRYPTED_MS are given up (their keys will not come). Returns whether any were. */
  private forgetOldUndecrypted(): boolean {
    const now = Date.now();
    const kept = this.undecrypted.filter((held) => now - held.at < UNDECRYPTED_MS);
    if (kept.length === this.undecrypted.length) return false;
    this.log.warn({ dropped: this.undecrypted.length - kept.length }, 'matrix: encrypted messages whose keys never came are given up');
    this.undecrypted = kept;
    return true;
  }

  /** What the account's state says of encrypted messages it cannot read yet; undefined when there are none. */
  undecryptedSummary(): string | undefined {
    if (!this.undecrypted.length) return undefined;
    const rooms = [...new Set(this.undecrypted.map((held) => held.room))];
    const count = this.undecrypted.length;
    return `${count} encrypted message${count === 1 ? '' : 's'} cannot be read yet: the sender's device has not shared the room key with this device (room${rooms.length === 1 ? '' : 's'} ${rooms.slice(0, 5).join(', ')}${rooms.length > 5 ? ', …' : ''})`;
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
    // In an encrypted room the file is encrypted too: its address and key are in `file`.
    const encrypted = isObject(content.file) && typeof content.file.url === 'string' ? content.file : undefined;
    const url = encrypted ? encrypted.url : content.url;
    if (!['m.image', 'm.file', 'm.audio', 'm.video'].includes(content.msgtype as string) || typeof url !== 'string') return undefined;
    const mxc = /^mxc:\/\/([A-Za-z0-9.:[\]-]+)\/([A-Za-z0-9_-]+)$/.exec(url);
    if (!mxc) return undefined;
    const crypto = this.owner.crypto();
    if (encrypted && !crypto) return undefined;
    const info = isObject(content.info) ? content.info : {};
    const name = typeof content.filename === 'string' ? content.filename : typeof content.body === 'string' && content.body ? content.body : 'file';
    return {
      name: name.slice(0, 255),
      mimeType: typeof info.mimetype === 'string' ? info.mimetype : undefined,
      size: typeof info.size === 'number' ? info.size : undefined,
      // A voice message: m.audio with its voice mark (MSC3245, as Element records them).
      ...(content.msgtype === 'm.audio' && isObject(content['org.matrix.msc3245.voice']) ? { voice: true } : {}),
      fetch: async (maxBytes, signal) => {
        const bytes = await this.owner.api().download(mxc[1]!, mxc[2]!, maxBytes, signal);
        return encrypted ? crypto!.decryptFile(bytes, encrypted) : bytes;
      },
    };
  }
}

