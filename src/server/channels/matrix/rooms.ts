/**
 * What one Matrix account knows of its rooms: how many members each has (a
 * room of two is a direct chat), its configured rooms by alias, which rooms
 * are end-to-end encrypted, each person's direct room, and the invites
 * waiting for their sender to be approved. Invites are accepted from senders
 * who may talk (allowFrom, approved); the others wait, with a pairing request
 * for the operator, and are joined once approved. Invites to encrypted rooms are refused with the
 * reason when the account does not encrypt.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { ChannelContext } from '../../kernel/channel.ts';
import { isObject, MatrixError, USER_ID, type MatrixApi, type RawEvent } from './api.ts';

/** How often invites waiting for their sender's approval are looked at again. */
const RECHECK_MS = 15_000;
/** Invites kept waiting at most (the oldest are forgotten first). */
const MAX_WAITING_INVITES = 200;
const ENCRYPTED_REASON = 'This gateway cannot read end-to-end encrypted rooms (its encryption is turned off): invite it to a room without encryption.';
const ENCRYPTED_NOTICE = 'This room is end-to-end encrypted, and this gateway has its encryption turned off: it cannot read encrypted messages. Write to it in a room without encryption.';

/** An invite waiting for its sender's approval. */
export interface Waiting { sender: string; at: number; direct?: boolean }

/** What the rooms need of their account. */
export interface RoomsOwner {
  /** The account's name. */
  readonly name: string;
  log(): Logger;
  /** The account's API client and user id, once it is set up. */
  api(): MatrixApi;
  me(): string;
  admit: ChannelContext['admit'];
  /** Keeps where the account left off, the invites waiting with it. */
  save(): Promise<void>;
  /** Whether the account reads and writes end-to-end encrypted rooms. */
  encrypts(): boolean;
}

export class MatrixRooms {
  /** Invites waiting for their sender's approval, by room; kept with the sync token. */
  waiting?: Record<string, Waiting>;
  private lastRecheck = 0;
  /** Joined members of each room seen, learned when first needed, forgotten when its membership changes. */
  private readonly members = new Map<string, string[]>();
  /** Rooms known not to be encrypted (asked when sending), forgotten when encryption is turned on. */
  private readonly plain = new Set<string>();
  /** Encrypted rooms whose members' devices are followed, until their membership changes. */
  private readonly tracked = new Set<string>();
  /** Configured rooms by alias, as their ids. */
  private readonly aliases = new Map<string, string>();
  private readonly encrypted = new Set<string>();
  private readonly toldEncrypted = new Set<string>();
  /** Each person's direct room, as last written in. */
  private readonly direct = new Map<string, string>();
  private readonly owner: RoomsOwner;

  constructor(owner: RoomsOwner) {
    this.owner = owner;
  }

  private api<T>(method: string, path: string, body?: unknown): Promise<T> {
    return this.owner.api().call<T>(method, path, body);
  }

  private get log(): Logger {
    return this.owner.log();
  }

  /** Joins the configured rooms ("*" is any room the account is in), noting the ids of those named by alias. */
  async joinConfigured(rooms: readonly string[]): Promise<void> {
    for (const room of rooms) {
      if (room === '*') continue;
      try {
        const joined = await this.api<{ room_id?: unknown }>('POST', `/v3/join/${encodeURIComponent(room)}`, {});
        if (typeof joined.room_id === 'string') this.aliases.set(room, joined.room_id);
      } catch (error) {
        if (error instanceof MatrixError && error.status === 401) throw error;
        this.log.warn({ room, error: (error as Error).message }, 'matrix: a configured room could not be joined');
      }
    }
  }

  /** The account left a room (or was removed): its members are forgotten, and an invite waiting for it dropped. Returns whether waiting invites changed. */
  left(roomId: string): boolean {
    this.members.delete(roomId);
    if (!this.waiting?.[roomId]) return false;
    delete this.waiting[roomId];
    return true;
  }

  /** A state or timeline event of a joined room: encryption turned on, or its membership changed. */
  saw(roomId: string, event: RawEvent): void {
    if (event.type === 'm.room.encryption' || event.type === 'm.room.encrypted') {
      this.encrypted.add(roomId);
      this.plain.delete(roomId);
    }
    if (event.type === 'm.room.member') {
      this.members.delete(roomId);
      this.tracked.delete(roomId);
    }
  }

  /** An encrypted room whose members' devices are not followed yet (new, or its membership changed). */
  needsTracking(roomId: string): boolean {
    return this.encrypted.has(roomId) && !this.tracked.has(roomId);
  }

  /** The room's members' devices are followed now. */
  trackedNow(roomId: string): void {
    this.tracked.add(roomId);
  }

  /** Whether a room is encrypted, asking the homeserver for its m.room.encryption state when it is not known yet (after a restart). */
  async encryptedNow(roomId: string): Promise<boolean> {
    if (this.encrypted.has(roomId)) return true;
    if (this.plain.has(roomId)) return false;
    try {
      await this.api('GET', `/v3/rooms/${encodeURIComponent(roomId)}/state/m.room.encryption/`);
      this.encrypted.add(roomId);
      return true;
    } catch (error) {
      if (!(error instanceof MatrixError) || error.status !== 404) throw error;
      this.plain.add(roomId);
      return false;
    }
  }

  /** Whether a room is one of the configured ones (by id, or by an alias it was joined by). */
  isConfigured(roomId: string, rooms: readonly string[]): boolean {
    return rooms.includes(roomId) || [...this.aliases].some(([alias, id]) => id === roomId && rooms.includes(alias));
  }

  isEncrypted(roomId: string): boolean {
    return this.encrypted.has(roomId);
  }

  /** A person wrote in a room of two: their direct room from now on. */
  noteDirect(person: string, roomId: string): void {
    this.direct.set(person, roomId);
  }

  /** An invite: joined when its sender may talk, refused for an encrypted room, else kept waiting (and a pairing request made). */
  async invited(roomId: string, state: RawEvent[]): Promise<boolean> {
    const me = this.owner.me();
    const mine = state.find((event) => event.type === 'm.room.member' && event.state_key === me && isObject(event.content) && event.content.membership === 'invite');
    const sender = typeof mine?.sender === 'string' && USER_ID.test(mine.sender) ? mine.sender : undefined;
    if (!sender || this.waiting?.[roomId]) return false;
    // A direct chat, as the inviting client says (`is_direct`): the person's room from then on.
    const direct = isObject(mine!.content) && mine!.content.is_direct === true;
    if (!this.owner.encrypts() && state.some((event) => event.type === 'm.room.encryption')) {
      this.log.warn({ room: roomId, sender }, 'matrix: an invite to an encrypted room refused');
      await this.api('POST', `/v3/rooms/${encodeURIComponent(roomId)}/leave`, { reason: ENCRYPTED_REASON }).catch((error: unknown) => this.log.warn({ err: error }, 'matrix: could not refuse an invite'));
      return false;
    }
    const verdict = await this.owner.admit({ account: this.owner.name, sender, senderName: sender, ask: true });
    if (verdict === 'allowed') {
      await this.join(roomId, sender, direct);
      return false;
    }
    this.log.info({ room: roomId, sender, verdict }, 'matrix: an invite waits for its sender to be approved');
    const waiting = { ...this.waiting, [roomId]: { sender, at: Date.now(), ...(direct ? { direct } : {}) } };
    const kept = Object.entries(waiting).sort(([, a], [, b]) => b.at - a.at).slice(0, MAX_WAITING_INVITES);
    this.waiting = Object.fromEntries(kept);
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
      return await this.api<Record<string, unknown>>('GET', `/v3/user/${encodeURIComponent(this.owner.me())}/account_data/m.direct`);
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
      await this.api('PUT', `/v3/user/${encodeURIComponent(this.owner.me())}/account_data/m.direct`, { ...list, [person]: [roomId, ...rooms].slice(0, 20) });
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

  /** Every RECHECK_MS, invites whose senders may talk now (approved since, or allowed by the config) are joined. */
  async recheckWaiting(): Promise<void> {
    if (Date.now() - this.lastRecheck <= RECHECK_MS) return;
    this.lastRecheck = Date.now();
    for (const [roomId, waiting] of Object.entries(this.waiting ?? {})) {
      if (await this.owner.admit({ account: this.owner.name, sender: waiting.sender, senderName: waiting.sender, ask: false }) !== 'allowed') continue;
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
    delete this.waiting?.[roomId];
    await this.owner.save();
  }

  /** How many members a room has now; NaN for a room the account has left since (its events are not answered). */
  async joinedMembers(roomId: string): Promise<number> {
    return (await this.memberIds(roomId))?.length ?? Number.NaN;
  }

  /** The user ids of a room's joined members; undefined for a room the account has left since. */
  async memberIds(roomId: string): Promise<string[] | undefined> {
    let ids = this.members.get(roomId);
    if (ids === undefined) {
      try {
        const joined = await this.api<{ joined?: unknown }>('GET', `/v3/rooms/${encodeURIComponent(roomId)}/joined_members`);
        ids = isObject(joined.joined) ? Object.keys(joined.joined).filter((id) => USER_ID.test(id)) : [];
      } catch (error) {
        if (error instanceof MatrixError && (error.status === 403 || error.status === 404)) return undefined;
        throw error;
      }
      this.members.set(roomId, ids);
    }
    return ids;
  }

  /** Says once per room (per start) that encrypted messages cannot be read (the account's encryption is off), and logs it. */
  async tellEncrypted(roomId: string, sender: string): Promise<void> {
    this.encrypted.add(roomId);
    if (this.toldEncrypted.has(roomId)) return;
    this.toldEncrypted.add(roomId);
    this.log.warn({ room: roomId, sender }, 'matrix: an encrypted message cannot be read; the room was told');
    await this.api('PUT', `/v3/rooms/${encodeURIComponent(roomId)}/send/m.room.message/${randomUUID()}`, { msgtype: 'm.notice', body: ENCRYPTED_NOTICE })
      .catch((error: unknown) => this.log.warn({ error: (error as Error).message }, 'matrix: could not tell a room it is encrypted'));
  }

  /** The room a message goes to: a room id, an alias, or a person's direct room (joined from their waiting invite, or made). */
  async roomFor(to: string): Promise<string> {
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
    const waiting = Object.entries(this.waiting ?? {}).find(([, invite]) => invite.sender === peer);
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
}
