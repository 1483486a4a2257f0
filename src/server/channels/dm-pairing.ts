import { randomInt } from 'node:crypto';
import {
  MAX_PENDING_PER_ACCOUNT, PAIRING_CODE_ALPHABET, PAIRING_CODE_LENGTH, PAIRING_CODE_TTL_MS,
} from '../../shared/channels.ts';
import type { DmPairingRequestView } from '../../shared/protocol/results.ts';
import type { Db, Store } from '../store/database.ts';
import type { Migration } from '../store/migrations.ts';
import { pruneRows } from '../store/retention.ts';

export type DmRequestStatus = 'pending' | 'approved' | 'rejected';

export interface DmPairingRequest {
  channel: string;
  account: string;
  code: string;
  sender: string;
  senderName: string | null;
  status: DmRequestStatus;
  createdAt: number;
  expiresAt: number;
  resolvedAt: number | null;
  resolvedBy: string | null;
}

export interface AllowedSender {
  channel: string;
  sender: string;
  account: string | null;
  senderName: string | null;
  addedAt: number;
  addedBy: string;
  code: string | null;
}

/** What a DM from an unknown sender led to under the pairing policy. */
export type PairingOutcome =
  | { kind: 'created'; request: DmPairingRequest }
  | { kind: 'pending'; request: DmPairingRequest }
  | { kind: 'full' };

/** Why a code could not be decided. */
export type DecisionFailure = 'unknown' | 'expired' | 'rejected' | 'approved';

type Row = Record<string, string | number | bigint | null>;
const str = (value: unknown): string | null => (value === null || value === undefined ? null : String(value));
const num = (value: unknown): number | null => (value === null || value === undefined ? null : Number(value));

const toRequest = (row: Row): DmPairingRequest => ({
  channel: String(row.channel), account: String(row.account), code: String(row.code), sender: String(row.sender),
  senderName: str(row.sender_name), status: String(row.status) as DmRequestStatus, createdAt: Number(row.created_at),
  expiresAt: Number(row.expires_at), resolvedAt: num(row.resolved_at), resolvedBy: str(row.resolved_by),
});

const toAllowed = (row: Row): AllowedSender => ({
  channel: String(row.channel), sender: String(row.sender), account: str(row.account), senderName: str(row.sender_name),
  addedAt: Number(row.added_at), addedBy: String(row.added_by), code: str(row.code),
});

const newCode = (): string => Array.from({ length: PAIRING_CODE_LENGTH }, () => PAIRING_CODE_ALPHABET[randomInt(PAIRING_CODE_ALPHABET.length)]).join('');

export const CHANNEL_MIGRATIONS: readonly Migration[] = [{
  version: 1,
  name: 'channel pairing and allow-lists',
  was: { schema: 5 },
  sql: `
    CREATE TABLE channel_pairing_requests (
      channel TEXT NOT NULL,
      code TEXT NOT NULL,
      account TEXT NOT NULL,
      sender TEXT NOT NULL,
      sender_name TEXT,
      status TEXT NOT NULL,
      created_at BIGINT NOT NULL,
      expires_at BIGINT NOT NULL,
      resolved_at BIGINT,
      resolved_by TEXT,
      PRIMARY KEY (channel, code)
    );
    CREATE INDEX channel_pairing_sender ON channel_pairing_requests (channel, account, sender, expires_at);
    CREATE INDEX channel_pairing_open ON channel_pairing_requests (channel, account, status, expires_at);
    CREATE TABLE channel_allowlist (
      channel TEXT NOT NULL,
      sender TEXT NOT NULL,
      account TEXT,
      sender_name TEXT,
      added_at BIGINT NOT NULL,
      added_by TEXT NOT NULL,
      code TEXT,
      PRIMARY KEY (channel, sender)
    );
  `,
}];

type Decision = { request: DmPairingRequest } | { failure: DecisionFailure; request?: DmPairingRequest };

/**
 * Direct-message pairing: codes for unknown senders, and each channel's
 * allow-list of approved senders, in the profile's database.
 */
export class DmPairing {
  private readonly store: Store;
  private readonly now: () => number;

  constructor(store: Store, now: () => number = Date.now) {
    this.store = store;
    this.now = now;
  }

  /**
   * An unknown sender wrote: reuse the sender's open request within its lifetime
   * (a rejected one too, so a refused sender is not answered again), or make a
   * new one unless the account already has its fill of pending codes.
   */
  request(channel: string, account: string, sender: string, senderName: string, db: Db = this.store): Promise<PairingOutcome> {
    return db.transaction(async (tx): Promise<PairingOutcome> => {
      const now = this.now();
      const open = await tx.get<Row>(
        "SELECT * FROM channel_pairing_requests WHERE channel = ? AND account = ? AND sender = ? AND status IN ('pending', 'rejected') AND expires_at > ? ORDER BY created_at DESC LIMIT 1",
        channel, account, sender, now);
      if (open) return { kind: 'pending', request: toRequest(open) };
      const pending = await tx.get<{ n: number }>(
        "SELECT COUNT(*) AS n FROM channel_pairing_requests WHERE channel = ? AND account = ? AND status = 'pending' AND expires_at > ?", channel, account, now);
      if (Number(pending?.n) >= MAX_PENDING_PER_ACCOUNT) return { kind: 'full' };
      for (;;) {
        const code = newCode();
        const { changes } = await tx.run(
          "INSERT INTO channel_pairing_requests (channel, code, account, sender, sender_name, status, created_at, expires_at) VALUES (?, ?, ?, ?, ?, 'pending', ?, ?) ON CONFLICT (channel, code) DO NOTHING",
          channel, code, account, sender, senderName, now, now + PAIRING_CODE_TTL_MS);
        if (changes === 1) return { kind: 'created', request: (await this.find(channel, code, tx))! };
      }
    });
  }

  async find(channel: string, code: string, db: Db = this.store): Promise<DmPairingRequest | undefined> {
    const row = await db.get<Row>('SELECT * FROM channel_pairing_requests WHERE channel = ? AND code = ?', channel, code);
    return row ? toRequest(row) : undefined;
  }

  /** Pending, unexpired requests, oldest first. */
  async pending(channel?: string): Promise<DmPairingRequest[]> {
    const rows = channel === undefined
      ? await this.store.all<Row>("SELECT * FROM channel_pairing_requests WHERE status = 'pending' AND expires_at > ? ORDER BY created_at, code", this.now())
      : await this.store.all<Row>("SELECT * FROM channel_pairing_requests WHERE channel = ? AND status = 'pending' AND expires_at > ? ORDER BY created_at, code", channel, this.now());
    return rows.map(toRequest);
  }

  /** Why a code cannot be decided now, or undefined when it is pending and valid. */
  private failure(request: DmPairingRequest | undefined): DecisionFailure | undefined {
    if (!request) return 'unknown';
    if (request.status === 'approved') return 'approved';
    if (request.status === 'rejected') return 'rejected';
    if (request.expiresAt <= this.now()) return 'expired';
    return undefined;
  }

  /** Approves a pending code and adds its sender to the channel's allow-list, in one transaction. */
  approve(channel: string, code: string, actor: string): Promise<Decision> {
    return this.store.transaction(async (tx): Promise<Decision> => {
      const request = await this.find(channel, code, tx);
      const failure = this.failure(request);
      if (failure) return { failure, ...(request ? { request } : {}) };
      const now = this.now();
      await tx.run("UPDATE channel_pairing_requests SET status = 'approved', resolved_at = ?, resolved_by = ? WHERE channel = ? AND code = ?", now, actor, channel, code);
      await tx.run('INSERT INTO channel_allowlist (channel, sender, account, sender_name, added_at, added_by, code) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (channel, sender) DO NOTHING',
        channel, request!.sender, request!.account, request!.senderName, now, actor, code);
      return { request: (await this.find(channel, code, tx))! };
    });
  }

  reject(channel: string, code: string, actor: string): Promise<Decision> {
    return this.store.transaction(async (tx): Promise<Decision> => {
      const request = await this.find(channel, code, tx);
      const failure = this.failure(request);
      if (failure) return { failure, ...(request ? { request } : {}) };
      await tx.run("UPDATE channel_pairing_requests SET status = 'rejected', resolved_at = ?, resolved_by = ? WHERE channel = ? AND code = ?", this.now(), actor, channel, code);
      return { request: (await this.find(channel, code, tx))! };
    });
  }

  async isAllowed(channel: string, sender: string, db: Db = this.store): Promise<boolean> {
    return (await db.get('SELECT 1 AS allowed FROM channel_allowlist WHERE channel = ? AND sender = ?', channel, sender)) !== undefined;
  }

  async allowed(channel?: string): Promise<AllowedSender[]> {
    const rows = channel === undefined
      ? await this.store.all<Row>('SELECT * FROM channel_allowlist ORDER BY channel, added_at')
      : await this.store.all<Row>('SELECT * FROM channel_allowlist WHERE channel = ? ORDER BY added_at', channel);
    return rows.map(toAllowed);
  }

  /** How many senders a channel allows. */
  async allowedCount(channel: string): Promise<number> {
    return Number((await this.store.get<{ n: number }>('SELECT COUNT(*) AS n FROM channel_allowlist WHERE channel = ?', channel))?.n ?? 0);
  }

  /** Removes a sender from the allow-list; false when it was not on it. */
  async revoke(channel: string, sender: string): Promise<boolean> {
    return (await this.store.run('DELETE FROM channel_allowlist WHERE channel = ? AND sender = ?', channel, sender)).changes === 1;
  }

  /** Forgets decided and expired requests older than the retention. */
  async prune(olderThanMs: number): Promise<number> {
    const cutoff = this.now() - olderThanMs;
    return pruneRows(this.store, 'channel_pairing_requests', 'channel, code', 'expires_at < ?', cutoff);
  }
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

/** A pairing request as the protocol shows it. */
export const pairRequestView = (request: DmPairingRequest): DmPairingRequestView => ({
  channel: request.channel, account: request.account, code: request.code, sender: request.sender, senderName: request.senderName,
  createdAt: iso(request.createdAt), expiresAt: iso(request.expiresAt),
});
