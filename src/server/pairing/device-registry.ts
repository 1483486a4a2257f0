import { createHash, randomBytes, randomInt, timingSafeEqual } from 'node:crypto';
import { Limits } from '../../shared/protocol/limits.ts';
import type { Store } from '../store/database.ts';

export interface Device {
  id: string;
  publicKey: string;
  role: string;
  scopes: string[];
  clientId: string | null;
  platform: string | null;
  pairedAt: number;
  pairedBy: string;
  lastSeenAt: number | null;
  lastAddress: string | null;
  rotatedAt: number | null;
  revokedAt: number | null;
}

export interface PairingRequest {
  id: string;
  deviceId: string;
  publicKey: string;
  role: string;
  scopes: string[];
  clientId: string | null;
  platform: string | null;
  address: string | null;
  viaProxy: boolean;
  createdAt: number;
  expiresAt: number;
  status: 'pending' | 'approved' | 'rejected' | 'replaced';
}

export interface DeviceClaim {
  deviceId: string;
  publicKey: string;
  role: string;
  scopes: string[];
  clientId: string;
  platform: string;
  address: string;
  viaProxy: boolean;
}

/** Codes people type: no 0/O, 1/I/L. */
const ALPHABET = 'ABCDEFGHJKMNPQRSTUVWXYZ23456789';
const code = (length: number): string => Array.from({ length }, () => ALPHABET[randomInt(ALPHABET.length)]).join('');
const hash = (value: string): string => createHash('sha256').update(value).digest('hex');
const newToken = (): string => randomBytes(32).toString('base64url');

type Row = Record<string, string | number | bigint | null>;
const num = (value: unknown): number | null => (value === null || value === undefined ? null : Number(value));

function toDevice(row: Row): Device {
  return {
    id: String(row.id), publicKey: String(row.public_key), role: String(row.role), scopes: JSON.parse(String(row.scopes)) as string[],
    clientId: row.client_id === null ? null : String(row.client_id), platform: row.platform === null ? null : String(row.platform),
    pairedAt: Number(row.paired_at), pairedBy: String(row.paired_by), lastSeenAt: num(row.last_seen_at),
    lastAddress: row.last_address === null ? null : String(row.last_address), rotatedAt: num(row.rotated_at), revokedAt: num(row.revoked_at),
  };
}

function toRequest(row: Row): PairingRequest {
  return {
    id: String(row.id), deviceId: String(row.device_id), publicKey: String(row.public_key), role: String(row.role),
    scopes: JSON.parse(String(row.scopes)) as string[], clientId: row.client_id === null ? null : String(row.client_id),
    platform: row.platform === null ? null : String(row.platform), address: row.address === null ? null : String(row.address),
    viaProxy: Boolean(Number(row.via_proxy)), createdAt: Number(row.created_at), expiresAt: Number(row.expires_at),
    status: String(row.status) as PairingRequest['status'],
  };
}

/** Paired devices, pending pairing requests and invites, in the profile's database. */
export class DeviceRegistry {
  private readonly store: Store;
  private readonly now: () => number;

  constructor(store: Store, now: () => number = Date.now) {
    this.store = store;
    this.now = now;
  }

  get(id: string): Device | undefined {
    const row = this.store.prepare('SELECT * FROM devices WHERE id = ?').get(id) as Row | undefined;
    return row ? toDevice(row) : undefined;
  }

  /** Paired devices that are not revoked. */
  list(): Device[] {
    return (this.store.prepare('SELECT * FROM devices WHERE revoked_at IS NULL ORDER BY paired_at').all() as Row[]).map(toDevice);
  }

  pending(): PairingRequest[] {
    return (this.store.prepare("SELECT * FROM pairing_requests WHERE status = 'pending' AND expires_at > ? ORDER BY created_at")
      .all(this.now()) as Row[]).map(toRequest);
  }

  /** A pending request for the device, replacing any earlier one (a retry with other role or scopes). */
  request(claim: DeviceClaim): PairingRequest {
    return this.store.transaction(() => {
      const now = this.now();
      const existing = this.store.prepare("SELECT * FROM pairing_requests WHERE device_id = ? AND status = 'pending' AND expires_at > ?").get(claim.deviceId, now) as Row | undefined;
      if (existing) {
        const request = toRequest(existing);
        if (request.role === claim.role && request.scopes.join(',') === [...claim.scopes].sort().join(',')) return request;
        this.store.prepare("UPDATE pairing_requests SET status = 'replaced', resolved_at = ? WHERE id = ?").run(now, request.id);
      }
      const id = code(8);
      this.store.prepare(`INSERT INTO pairing_requests (id, device_id, public_key, role, scopes, client_id, platform, address, via_proxy, created_at, expires_at, status)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending')`).run(
        id, claim.deviceId, claim.publicKey, claim.role, JSON.stringify([...claim.scopes].sort()), claim.clientId, claim.platform,
        claim.address, claim.viaProxy ? 1 : 0, now, now + Limits.pairingRequestTtlMs,
      );
      return toRequest(this.store.prepare('SELECT * FROM pairing_requests WHERE id = ?').get(id) as Row);
    });
  }

  findPending(id: string): PairingRequest | undefined {
    const row = this.store.prepare("SELECT * FROM pairing_requests WHERE lower(id) = lower(?) AND status = 'pending' AND expires_at > ?").get(id, this.now()) as Row | undefined;
    return row ? toRequest(row) : undefined;
  }

  latestPending(): PairingRequest | undefined {
    return this.pending().at(-1);
  }

  /** Approves a pending request: the device is paired with the role and scopes it asked for. */
  approve(id: string, by: string): Device | undefined {
    return this.store.transaction(() => {
      const request = this.findPending(id);
      if (!request) return undefined;
      this.store.prepare("UPDATE pairing_requests SET status = 'approved', resolved_at = ? WHERE id = ?").run(this.now(), request.id);
      return this.upsert(request, by);
    });
  }

  reject(id: string): PairingRequest | undefined {
    const request = this.findPending(id);
    if (!request) return undefined;
    this.store.prepare("UPDATE pairing_requests SET status = 'rejected', resolved_at = ? WHERE id = ?").run(this.now(), request.id);
    return { ...request, status: 'rejected' };
  }

  private upsert(claim: Omit<DeviceClaim, 'viaProxy'> | PairingRequest, by: string): Device {
    const { deviceId } = claim;
    const scopes = JSON.stringify([...claim.scopes].sort());
    const now = this.now();
    const known = this.get(deviceId);
    if (known && known.revokedAt === null) {
      this.store.prepare('UPDATE devices SET role = ?, scopes = ? WHERE id = ?').run(claim.role, scopes, deviceId);
    } else {
      this.store.prepare('DELETE FROM devices WHERE id = ?').run(deviceId);
      this.store.prepare(`INSERT INTO devices (id, public_key, role, scopes, client_id, platform, token_hash, token_delivered, paired_at, paired_by)
        VALUES (?, ?, ?, ?, ?, ?, NULL, FALSE, ?, ?)`).run(deviceId, claim.publicKey, claim.role, scopes, claim.clientId, claim.platform, now, by);
    }
    return this.get(deviceId)!;
  }

  /** Pairs a device at once (a direct loopback connection, or a redeemed invite). */
  pairDirect(claim: DeviceClaim, by: string): Device {
    return this.store.transaction(() => this.upsert(claim, by));
  }

  /** The device's token, when it has never been handed to the device; a new one each time it is asked for. */
  issueTokenIfUndelivered(deviceId: string): string | undefined {
    const row = this.store.prepare('SELECT token_delivered FROM devices WHERE id = ? AND revoked_at IS NULL').get(deviceId) as Row | undefined;
    if (!row || Number(row.token_delivered)) return undefined;
    const token = newToken();
    this.store.prepare('UPDATE devices SET token_hash = ?, token_delivered = TRUE WHERE id = ?').run(hash(token), deviceId);
    return token;
  }

  /** The device a token belongs to, if it is valid and the device is not revoked. */
  verifyToken(deviceId: string, token: string): Device | undefined {
    const device = this.store.prepare('SELECT * FROM devices WHERE id = ? AND revoked_at IS NULL').get(deviceId) as Row | undefined;
    if (!device || device.token_hash === null) return undefined;
    const expected = Buffer.from(String(device.token_hash), 'hex');
    const given = Buffer.from(hash(token), 'hex');
    return timingSafeEqual(expected, given) ? toDevice(device) : undefined;
  }

  markSeen(deviceId: string, address: string): void {
    this.store.bookkeeping(() => this.store.prepare('UPDATE devices SET last_seen_at = ?, last_address = ? WHERE id = ?').run(this.now(), address, deviceId));
  }

  revoke(deviceId: string): Device | undefined {
    const result = this.store.prepare('UPDATE devices SET revoked_at = ?, token_hash = NULL WHERE id = ? AND revoked_at IS NULL').run(this.now(), deviceId);
    return Number(result.changes) === 1 ? this.get(deviceId) : undefined;
  }

  /** A new token at once; the old one stops working. Returns the new token, shown once. */
  rotate(deviceId: string): string | undefined {
    const token = newToken();
    const result = this.store.prepare('UPDATE devices SET token_hash = ?, token_delivered = TRUE, rotated_at = ? WHERE id = ? AND revoked_at IS NULL')
      .run(hash(token), this.now(), deviceId);
    return Number(result.changes) === 1 ? token : undefined;
  }

  createInvite(role: string, scopes: string[], ttlMs: number): { code: string; expiresAt: number } {
    const invite = `${code(4)}-${code(4)}-${code(4)}`;
    const now = this.now();
    this.store.prepare('INSERT INTO device_invites (code_hash, role, scopes, created_at, expires_at) VALUES (?, ?, ?, ?, ?)')
      .run(hash(invite), role, JSON.stringify([...scopes].sort()), now, now + ttlMs);
    return { code: invite, expiresAt: now + ttlMs };
  }

  /** Uses an invite once; its role and scopes bound what the device gets. */
  redeemInvite(invite: string, deviceId: string): { role: string; scopes: string[] } | undefined {
    const key = hash(invite.trim().toUpperCase());
    return this.store.transaction(() => {
      const result = this.store.prepare('UPDATE device_invites SET used_at = ?, used_by = ? WHERE code_hash = ? AND used_at IS NULL AND expires_at > ?')
        .run(this.now(), deviceId, key, this.now());
      if (Number(result.changes) !== 1) return undefined;
      const row = this.store.prepare('SELECT role, scopes FROM device_invites WHERE code_hash = ?').get(key) as Row;
      return { role: String(row.role), scopes: JSON.parse(String(row.scopes)) as string[] };
    });
  }
}
