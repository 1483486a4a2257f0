import { randomInt } from 'node:crypto';
import {
  MAX_PENDING_PER_ACCOUNT, PAIRING_CODE_ALPHABET, PAIRING_CODE_LENGTH, PAIRING_CODE_TTL_MS,
} from '../../shared/channels.ts';
import type { Store } from '../store/database.ts';

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
  request(channel: string, account: string, sender: string, senderName: string): PairingOutcome {
    return this.store.transaction(() => {
      const now = this.now();
      const open = this.store.prepare(
        "SELECT * FROM channel_pairing_requests WHERE channel = ? AND account = ? AND sender = ? AND status IN ('pending', 'rejected') AND expires_at > ? ORDER BY created_at DESC LIMIT 1",
      ).get(channel, account, sender, now) as Row | undefined;
      if (open) return { kind: 'pending', request: toRequest(open) } as const;
      const pending = this.store.prepare(
        "SELECT COUNT(*) AS n FROM channel_pairing_requests WHERE channel = ? AND account = ? AND status = 'pending' AND expires_at > ?",
      ).get(channel, account, now) as { n: number };
      if (Number(pending.n) >= MAX_PENDING_PER_ACCOUNT) return { kind: 'full' } as const;
      const insert = this.store.prepare(
        "INSERT INTO channel_pairing_requests (channel, code, account, sender, sender_name, status, created_at, expires_at) VALUES (?, ?, ?, ?, ?, 'pending', ?, ?) ON CONFLICT (channel, code) DO NOTHING",
      );
      for (;;) {
        const code = newCode();
        if (Number(insert.run(channel, code, account, sender, senderName, now, now + PAIRING_CODE_TTL_MS).changes) === 1) {
          return { kind: 'created', request: this.find(channel, code)! } as const;
        }
      }
    });
  }

  find(channel: string, code: string): DmPairingRequest | undefined {
    const row = this.store.prepare('SELECT * FROM channel_pairing_requests WHERE channel = ? AND code = ?').get(channel, code) as Row | undefined;
    return row ? toRequest(row) : undefined;
  }

  /** Pending, unexpired requests, oldest first. */
  pending(channel?: string): DmPairingRequest[] {
    const rows = channel === undefined
      ? this.store.prepare("SELECT * FROM channel_pairing_requests WHERE status = 'pending' AND expires_at > ? ORDER BY created_at, code").all(this.now())
      : this.store.prepare("SELECT * FROM channel_pairing_requests WHERE channel = ? AND status = 'pending' AND expires_at > ? ORDER BY created_at, code").all(channel, this.now());
    return (rows as Row[]).map(toRequest);
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
  approve(channel: string, code: string, actor: string): { request: DmPairingRequest } | { failure: DecisionFailure; request?: DmPairingRequest } {
    return this.store.transaction(() => {
      const request = this.find(channel, code);
      const failure = this.failure(request);
      if (failure) return { failure, ...(request ? { request } : {}) };
      const now = this.now();
      this.store.prepare("UPDATE channel_pairing_requests SET status = 'approved', resolved_at = ?, resolved_by = ? WHERE channel = ? AND code = ?").run(now, actor, channel, code);
      this.store.prepare(
        'INSERT INTO channel_allowlist (channel, sender, account, sender_name, added_at, added_by, code) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (channel, sender) DO NOTHING',
      ).run(channel, request!.sender, request!.account, request!.senderName, now, actor, code);
      return { request: this.find(channel, code)! };
    });
  }

  reject(channel: string, code: string, actor: string): { request: DmPairingRequest } | { failure: DecisionFailure; request?: DmPairingRequest } {
    return this.store.transaction(() => {
      const request = this.find(channel, code);
      const failure = this.failure(request);
      if (failure) return { failure, ...(request ? { request } : {}) };
      this.store.prepare("UPDATE channel_pairing_requests SET status = 'rejected', resolved_at = ?, resolved_by = ? WHERE channel = ? AND code = ?").run(this.now(), actor, channel, code);
      return { request: this.find(channel, code)! };
    });
  }

  isAllowed(channel: string, sender: string): boolean {
    return this.store.prepare('SELECT 1 FROM channel_allowlist WHERE channel = ? AND sender = ?').get(channel, sender) !== undefined;
  }

  allowed(channel?: string): AllowedSender[] {
    const rows = channel === undefined
      ? this.store.prepare('SELECT * FROM channel_allowlist ORDER BY channel, added_at').all()
      : this.store.prepare('SELECT * FROM channel_allowlist WHERE channel = ? ORDER BY added_at').all(channel);
    return (rows as Row[]).map(toAllowed);
  }

  /** Removes a sender from the allow-list; false when it was not on it. */
  revoke(channel: string, sender: string): boolean {
    return Number(this.store.prepare('DELETE FROM channel_allowlist WHERE channel = ? AND sender = ?').run(channel, sender).changes) === 1;
  }

  /** Forgets decided and expired requests older than the retention. */
  prune(olderThanMs: number): number {
    const cutoff = this.now() - olderThanMs;
    return Number(this.store.prepare('DELETE FROM channel_pairing_requests WHERE expires_at < ?').run(cutoff).changes);
  }
}
