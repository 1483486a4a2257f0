import { createHash, randomBytes, randomInt, timingSafeEqual } from 'node:crypto';
import { Limits } from '../../shared/protocol/limits.ts';
import type { Db, Store } from '../store/database.ts';
import type { Migration } from '../store/migrations.ts';

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

export const PAIRING_MIGRATIONS: readonly Migration[] = [{
  version: 1,
  name: 'devices, pairing requests and invites',
  was: { schema: 2 },
  sql: `
    CREATE TABLE devices (
      id TEXT PRIMARY KEY,
      public_key TEXT NOT NULL,
      role TEXT NOT NULL,
      scopes TEXT NOT NULL,
      client_id TEXT,
      platform TEXT,
      token_hash TEXT,
      token_delivered BOOLEAN NOT NULL DEFAULT FALSE,
      paired_at BIGINT NOT NULL,
      paired_by TEXT NOT NULL,
      last_seen_at BIGINT,
      last_address TEXT,
      rotated_at BIGINT,
      revoked_at BIGINT
    );
    CREATE TABLE pairing_requests (
      id TEXT PRIMARY KEY,
      device_id TEXT NOT NULL,
      public_key TEXT NOT NULL,
      role TEXT NOT NULL,
      scopes TEXT NOT NULL,
      client_id TEXT,
      platform TEXT,
      address TEXT,
      via_proxy BOOLEAN NOT NULL,
      created_at BIGINT NOT NULL,
      expires_at BIGINT NOT NULL,
      status TEXT NOT NULL,
      resolved_at BIGINT
    );
    CREATE INDEX pairing_requests_device ON pairing_requests (device_id, status);
    CREATE TABLE device_invites (
      code_hash TEXT PRIMARY KEY,
      role TEXT NOT NULL,
      scopes TEXT NOT NULL,
      created_at BIGINT NOT NULL,
      expires_at BIGINT NOT NULL,
      used_at BIGINT,
      used_by TEXT
    );
  `,
}];

/** Paired devices, pending pairing requests and invites, in the profile's database. */
export class DeviceRegistry {
  private readonly store: Store;
  private readonly now: () => number;

  constructor(store: Store, now: () => number = Date.now) {
    this.store = store;
    this.now = now;
  }

  async get(id: string, db: Db = this.store): Promise<Device | undefined> {
    const row = await db.get<Row>('SELECT * FROM devices WHERE id = ?', id);
    return row ? toDevice(row) : undefined;
  }

  /** Paired devices that are not revoked. */
  async list(): Promise<Device[]> {
    return (await this.store.all<Row>('SELECT * FROM devices WHERE revoked_at IS NULL ORDER BY paired_at')).map(toDevice);
  }

  async pending(): Promise<PairingRequest[]> {
    return (await this.store.all<Row>("SELECT * FROM pairing_requests WHERE status = 'pending' AND expires_at > ? ORDER BY created_at", this.now())).map(toRequest);
  }

  /** A pending request for the device, replacing any earlier one (a retry with other role or scopes). */
  request(claim: DeviceClaim): Promise<PairingRequest> {
    return this.store.transaction(async (tx) => {
      const now = this.now();
      const existing = await tx.get<Row>("SELECT * FROM pairing_requests WHERE device_id = ? AND status = 'pending' AND expires_at > ?", claim.deviceId, now);
      if (existing) {
        const request = toRequest(existing);
        if (request.role === claim.role && request.scopes.join(',') === [...claim.scopes].sort().join(',')) return request;
        await tx.run("UPDATE pairing_requests SET status = 'replaced', resolved_at = ? WHERE id = ?", now, request.id);
      }
      const id = code(8);
      await tx.run(`INSERT INTO pairing_requests (id, device_id, public_key, role, scopes, client_id, platform, address, via_proxy, created_at, expires_at, status)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending')`,
      id, claim.deviceId, claim.publicKey, claim.role, JSON.stringify([...claim.scopes].sort()), claim.clientId, claim.platform,
      claim.address, claim.viaProxy ? 1 : 0, now, now + Limits.pairingRequestTtlMs);
      return toRequest((await tx.get<Row>('SELECT * FROM pairing_requests WHERE id = ?', id))!);
    });
  }

  async findPending(id: string, db: Db = this.store): Promise<PairingRequest | undefined> {
    const row = await db.get<Row>("SELECT * FROM pairing_requests WHERE lower(id) = lower(?) AND status = 'pending' AND expires_at > ?", id, this.now());
    return row ? toRequest(row) : undefined;
  }

  async latestPending(): Promise<PairingRequest | undefined> {
    return (await this.pending()).at(-1);
  }

  /** Approves a pending request: the device is paired with the role and scopes it asked for. */
  approve(id: string, by: string): Promise<Device | undefined> {
    return this.store.transaction(async (tx) => {
      const request = await this.findPending(id, tx);
      if (!request) return undefined;
      await tx.run("UPDATE pairing_requests SET status = 'approved', resolved_at = ? WHERE id = ?", this.now(), request.id);
      return this.upsert(tx, request, by);
    });
  }

  async reject(id: string): Promise<PairingRequest | undefined> {
    return this.store.transaction(async (tx) => {
      const request = await this.findPending(id, tx);
      if (!request) return undefined;
      await tx.run("UPDATE pairing_requests SET status = 'rejected', resolved_at = ? WHERE id = ?", this.now(), request.id);
      return { ...request, status: 'rejected' as const };
    });
  }

  private async upsert(tx: Db, claim: Omit<DeviceClaim, 'viaProxy'> | PairingRequest, by: string): Promise<Device> {
    const { deviceId } = claim;
    const scopes = JSON.stringify([...claim.scopes].sort());
    const now = this.now();
    const known = await this.get(deviceId, tx);
    if (known && known.revokedAt === null) {
      await tx.run('UPDATE devices SET role = ?, scopes = ? WHERE id = ?', claim.role, scopes, deviceId);
    } else {
      await tx.run('DELETE FROM devices WHERE id = ?', deviceId);
      await tx.run(`INSERT INTO devices (id, public_key, role, scopes, client_id, platform, token_hash, token_delivered, paired_at, paired_by)
        VALUES (?, ?, ?, ?, ?, ?, NULL, FALSE, ?, ?)`, deviceId, claim.publicKey, claim.role, scopes, claim.clientId, claim.platform, now, by);
    }
    return (await this.get(deviceId, tx))!;
  }

  /** Pairs a device at once (a direct loopback connection, or a redeemed invite). */
  pairDirect(claim: DeviceClaim, by: string): Promise<Device> {
    return this.store.transaction((tx) => this.upsert(tx, claim, by));
  }

  /** The device's token, when it has never been handed to the device; a new one each time it is asked for. */
  async issueTokenIfUndelivered(deviceId: string): Promise<string | undefined> {
    const token = newToken();
    // Handed out once: of two connects asking at once, only the one whose update changes the row gets it.
    const { changes } = await this.store.run('UPDATE devices SET token_hash = ?, token_delivered = TRUE WHERE id = ? AND revoked_at IS NULL AND token_delivered = FALSE', hash(token), deviceId);
    return changes === 1 ? token : undefined;
  }

  /** The device a token belongs to, if it is valid and the device is not revoked. */
  async verifyToken(deviceId: string, token: string): Promise<Device | undefined> {
    const device = await this.store.get<Row>('SELECT * FROM devices WHERE id = ? AND revoked_at IS NULL', deviceId);
    if (!device || device.token_hash === null) return undefined;
    const expected = Buffer.from(String(device.token_hash), 'hex');
    const given = Buffer.from(hash(token), 'hex');
    return timingSafeEqual(expected, given) ? toDevice(device) : undefined;
  }

  /** Notes when and from where a device was last seen; never fails (what cannot be noted is in the store's health), so nobody need wait for it. */
  markSeen(deviceId: string, address: string): Promise<void> {
    return this.store.bookkeeping(() => this.store.run('UPDATE devices SET last_seen_at = ?, last_address = ? WHERE id = ?', this.now(), address, deviceId))
      .catch((error: unknown) => this.store.onUnexpected?.(error, 'when a device was last seen'));
  }

  async revoke(deviceId: string): Promise<Device | undefined> {
    const result = await this.store.run('UPDATE devices SET revoked_at = ?, token_hash = NULL WHERE id = ? AND revoked_at IS NULL', this.now(), deviceId);
    return result.changes === 1 ? this.get(deviceId) : undefined;
  }

  /** A new token at once; the old one stops working. Returns the new token, shown once. */
  async rotate(deviceId: string): Promise<string | undefined> {
    const token = newToken();
    const result = await this.store.run('UPDATE devices SET token_hash = ?, token_delivered = TRUE, rotated_at = ? WHERE id = ? AND revoked_at IS NULL',
      hash(token), this.now(), deviceId);
    return result.changes === 1 ? token : undefined;
  }

  async createInvite(role: string, scopes: string[], ttlMs: number): Promise<{ code: string; expiresAt: number }> {
    const invite = `${code(4)}-${code(4)}-${code(4)}`;
    const now = this.now();
    await this.store.run('INSERT INTO device_invites (code_hash, role, scopes, created_at, expires_at) VALUES (?, ?, ?, ?, ?)',
      hash(invite), role, JSON.stringify([...scopes].sort()), now, now + ttlMs);
    return { code: invite, expiresAt: now + ttlMs };
  }

  /** Uses an invite once; its role and scopes bound what the device gets. */
  redeemInvite(invite: string, deviceId: string): Promise<{ role: string; scopes: string[] } | undefined> {
    const key = hash(invite.trim().toUpperCase());
    return this.store.transaction(async (tx) => {
      const result = await tx.run('UPDATE device_invites SET used_at = ?, used_by = ? WHERE code_hash = ? AND used_at IS NULL AND expires_at > ?',
        this.now(), deviceId, key, this.now());
      if (result.changes !== 1) return undefined;
      const row = (await tx.get<Row>('SELECT role, scopes FROM device_invites WHERE code_hash = ?', key))!;
      return { role: String(row.role), scopes: JSON.parse(String(row.scopes)) as string[] };
    });
  }
}
