/**
 * End-to-end encryption of one Matrix account, through the Matrix crypto
 * library's OlmMachine (@matrix-org/matrix-sdk-crypto-wasm, loaded only when
 * an account encrypts).
 *
 * The account is one device (the device of its access token). Its identity
 * and one-time keys are uploaded (/keys/upload), the devices of the people in
 * its encrypted rooms looked up (/keys/query), Olm sessions with them made
 * from their one-time keys (/keys/claim), and room keys shared with them over
 * to-device messages (/sendToDevice) before a message goes into an encrypted
 * room. To-device messages a sync brings (room keys from people's devices)
 * are handed to the machine before the room events that need them.
 *
 * Its state is kept in the profile's database (crypto-store.ts), written
 * after each change, before the sync token that brought the change is kept,
 * and before anything encrypted with it leaves, so a daemon stopped anywhere
 * reads nothing twice that it cannot decrypt again, loses no key it was
 * sent, and never sends from a ratchet a person's device has moved past. The store is locked with a
 * passphrase from the secret store (channels.<id>.cryptoKey), made on first
 * use when the operator has not set one.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type * as Sdk from '@matrix-org/matrix-sdk-crypto-wasm';
import { isObject, MatrixError, Refused, USER_ID, type Content, type MatrixApi, type RawEvent } from './api.ts';
import { indexedDb, readSnapshot, restoreSnapshot, snapshotOf } from './crypto-store.ts';

type Library = typeof Sdk;
let library: Promise<Library> | undefined;
/** The library, its WebAssembly read without holding up the daemon (about 5 MB, read once). */
let openings = 0;
const load = (): Promise<Library> => (library ??= import('@matrix-org/matrix-sdk-crypto-wasm').then(async (sdk) => {
  await sdk.initAsync();
  return sdk;
}));

/** What the account gives its encryption. */
export interface CryptoOwner {
  /** The store's name in this process (one per channel and account; each opening adds a number to it). */
  store: string;
  userId: string;
  deviceId: string;
  api: () => MatrixApi;
  log: () => Logger;
  /** The secret holding the store's passphrase, its name (for messages), and a way to keep a new one. */
  passphrase: { name: string; get(): Promise<string | undefined>; keep(value: string): Promise<void> };
  /** The kept state: read at start, written after each change. */
  state: { get(): Promise<string | undefined>; set(value: string): Promise<void> };
}

/** The crypto library failed (not the homeserver): the account says so as it is, not as a network failure. */
export class CryptoFailure extends Error {}

/** Errors of the calls to the homeserver made for the machine: they are what they are (unreachable, refused). */
const fromHomeserver = new WeakSet<object>();

/** A message the account could not decrypt, and why. */
export interface Undecrypted { reason: 'missing-keys' | 'failed'; detail: string }

const strings = (value: unknown): string[] => (Array.isArray(value) ? value.filter((item): item is string => typeof item === 'string') : []);

export class MatrixCrypto {
  private readonly sdk: Library;
  private readonly machine: Sdk.OlmMachine;
  private readonly owner: CryptoOwner;
  /** The digest of the state last kept: an unchanged state is not written again. */
  private kept?: string;
  /** One call into the machine at a time (sharing a room key twice at once would send two). */
  private queue: Promise<unknown> = Promise.resolve();
  private closed = false;

  private constructor(sdk: Library, machine: Sdk.OlmMachine, owner: CryptoOwner, kept: string | undefined) {
    this.sdk = sdk;
    this.machine = machine;
    this.owner = owner;
    this.kept = kept;
  }

  /**
   * Opens the account's device: its kept state put back (the same device
   * and keys as before), or a new device made when there is none or the
   * access token is now another device's. Refused when the kept state cannot
   * be unlocked with the passphrase the secret store holds.
   */
  static async open(owner: CryptoOwner): Promise<MatrixCrypto> {
    let sdk: Library;
    try {
      sdk = await load();
      await indexedDb();
    } catch (error) {
      library = undefined;
      throw new CryptoFailure(`the Matrix crypto library could not be loaded (${error instanceof Error ? error.message : String(error)}): reinstall the gateway, or turn encryption off (gateway config set channels.matrix.encryption false)`);
    }
    const log = owner.log();
    const stored = await owner.state.get();
    let snapshot = stored ? (() => {
      try {
        return readSnapshot(Buffer.from(stored, 'base64'));
      } catch {
        throw new Refused(`the kept encryption state of ${owner.userId} is damaged; to start again as a new device, log the bot in again (a new access token is a new device)`);
      }
    })() : undefined;
    if (snapshot && (snapshot.userId !== owner.userId || snapshot.deviceId !== owner.deviceId)) {
      log.warn({ was: snapshot.deviceId, now: owner.deviceId }, 'matrix: the access token is another device now; its encryption starts anew (what was encrypted for the old device cannot be read)');
      snapshot = undefined;
    }
    let passphrase = await owner.passphrase.get();
    if (!passphrase) {
      if (snapshot) {
        throw new Refused(`the encryption keys of ${owner.userId} are locked with the secret ${owner.passphrase.name}, which the secret store no longer has: set it again (gateway secrets set ${owner.passphrase.name}), or log the bot in again to start as a new device`);
      }
      passphrase = randomBytes(32).toString('base64url');
      await owner.passphrase.keep(passphrase);
      log.info('matrix: a passphrase for the encryption keys was made and kept in the secret store');
    }
    // Each opening has a store of its own in this process. One closed before is not deleted: deleting a database whose
    // connection the library has not closed yet would wait for it for ever (the in-memory IndexedDB checks again and
    // again); it is a few kilobytes, gone when the daemon stops.
    const store = `${owner.store}#${++openings}`;
    let machine: Sdk.OlmMachine;
    try {
      if (snapshot) await restoreSnapshot(store, snapshot);
      const handle = await sdk.StoreHandle.open(store, passphrase);
      machine = await sdk.OlmMachine.initFromStore(new sdk.UserId(owner.userId), new sdk.DeviceId(owner.deviceId), handle);
    } catch (error) {
      if (snapshot) throw new Refused(`the encryption keys of ${owner.userId} cannot be unlocked with the secret ${owner.passphrase.name}: set the one they were made with, or log the bot in again to start as a new device`);
      throw new Refused(`the encryption store could not be made: ${(error as Error).message ?? String(error)}`);
    }
    const crypto = new MatrixCrypto(sdk, machine, { ...owner, store }, stored ? digest(stored) : undefined);
    log.info({ device: owner.deviceId, ed25519: machine.identityKeys.ed25519.toBase64() }, snapshot ? 'matrix: the encryption device was opened from its kept state' : 'matrix: a new encryption device was made');
    await crypto.exclusive(() => crypto.flushLocked());
    return crypto;
  }

  /** The device's public ed25519 key (shown to people who verify it). */
  get fingerprint(): string {
    return this.machine.identityKeys.ed25519.toBase64();
  }

  private exclusive<T>(work: () => Promise<T>): Promise<T> {
    const next = this.queue.then(() => {
      if (this.closed) throw new CryptoFailure('the encryption of this account is closed');
      return work();
    }).catch((error: unknown) => {
      if (error instanceof MatrixError || error instanceof CryptoFailure || (typeof error === 'object' && error !== null && fromHomeserver.has(error))) throw error;
      throw new CryptoFailure(`end-to-end encryption failed: ${error instanceof Error ? error.message : String(error)}`);
    });
    this.queue = next.catch(() => undefined);
    return next;
  }

  private userIds(users: readonly string[]): Sdk.UserId[] {
    const ids: Sdk.UserId[] = [];
    for (const user of users) {
      if (!USER_ID.test(user)) continue;
      try {
        ids.push(new this.sdk.UserId(user));
      } catch {
        // not a user id the library takes
      }
    }
    return ids;
  }

  /**
   * What a sync brought for the device: to-device messages (room keys,
   * Olm session starts), whose devices changed, how many one-time keys are
   * left. Then what the machine wants sent goes out, and the state is kept.
   * Returns whether a to-device message was read (a room key may have come).
   */
  receive(sync: Record<string, unknown>): Promise<boolean> {
    return this.exclusive(async () => {
      const toDevice = isObject(sync.to_device) && Array.isArray(sync.to_device.events) ? sync.to_device.events.filter(isObject) : [];
      const lists = isObject(sync.device_lists) ? sync.device_lists : {};
      const counts = new Map<string, number>(Object.entries(isObject(sync.device_one_time_keys_count) ? sync.device_one_time_keys_count : {})
        .filter((entry): entry is [string, number] => typeof entry[1] === 'number' && Number.isFinite(entry[1])));
      const fallback = Array.isArray(sync.device_unused_fallback_key_types) ? new Set(strings(sync.device_unused_fallback_key_types)) : undefined;
      const processed = await this.machine.receiveSyncChanges(JSON.stringify(toDevice), new this.sdk.DeviceLists(this.userIds(strings(lists.changed)), this.userIds(strings(lists.left))),
        counts, fallback, new this.sdk.DecryptionSettings(this.sdk.TrustRequirement.Untrusted));
      for (const event of processed) {
        if (event.type === this.sdk.ProcessedToDeviceEventType.UnableToDecrypt) this.owner.log().warn('matrix: a to-device message could not be decrypted');
      }
      await this.flushLocked();
      return toDevice.length > 0;
    });
  }

  /** The people of an encrypted room: their devices are looked up and followed from now on. */
  track(users: readonly string[]): Promise<void> {
    return this.exclusive(async () => {
      await this.machine.updateTrackedUsers(this.userIds(users));
      await this.flushLocked();
    });
  }

  /** An encrypted room event made clear, or why it cannot be (the sender's device has not shared its key with this one). */
  decrypt(roomId: string, event: RawEvent): Promise<{ clear: RawEvent } | { undecrypted: Undecrypted }> {
    return this.exclusive(async () => {
      try {
        const decrypted = await this.machine.decryptRoomEvent(JSON.stringify(event), new this.sdk.RoomId(roomId), new this.sdk.DecryptionSettings(this.sdk.TrustRequirement.Untrusted));
        const clear = JSON.parse(decrypted.event) as unknown;
        if (!isObject(clear)) return { undecrypted: { reason: 'failed', detail: 'the decrypted event is not an object' } };
        // The envelope's sender, id and time stand; the type and content are what was encrypted.
        return { clear: { ...event, type: clear.type, content: clear.content } };
      } catch (error) {
        if (error instanceof this.sdk.MegolmDecryptionError) {
          const missing = error.code === this.sdk.DecryptionErrorCode.MissingRoomKey || error.code === this.sdk.DecryptionErrorCode.UnknownMessageIndex;
          return { undecrypted: { reason: missing ? 'missing-keys' : 'failed', detail: error.withheldCode ? `${error.description} (withheld: ${error.withheldCode})` : error.description } };
        }
        return { undecrypted: { reason: 'failed', detail: (error as Error).message } };
      }
    });
  }

  /**
   * A room event's content encrypted for the room: the members' devices
   * looked up, Olm sessions made where missing, the room key shared with
   * every device that lacks it; the state kept before the event is sent.
   */
  encrypt(roomId: string, members: readonly string[], type: string, content: Content): Promise<Content> {
    return this.exclusive(async () => {
      await this.machine.updateTrackedUsers(this.userIds(members));
      await this.flushLocked();
      const claim = await this.machine.getMissingSessions(this.userIds(members));
      if (claim) await this.sendRequest(claim);
      const settings = new this.sdk.EncryptionSettings();
      settings.sharingStrategy = this.sdk.CollectStrategy.allDevices();
      settings.historyVisibility = this.sdk.HistoryVisibility.Shared;
      for (const request of await this.machine.shareRoomKey(new this.sdk.RoomId(roomId), this.userIds(members), settings)) await this.sendRequest(request);
      const encrypted = JSON.parse(await this.machine.encryptRoomEvent(new this.sdk.RoomId(roomId), type, JSON.stringify(content))) as Content;
      await this.keep();
      return encrypted;
    });
  }

  /**
   * A file sent encrypted (its content's `file`: the key, iv and hash), made
   * clear; throws when its hash or key does not match what was fetched.
   */
  decryptFile(bytes: Uint8Array, file: Record<string, unknown>): Uint8Array {
    const { v, key, iv, hashes } = file;
    return this.sdk.Attachment.decrypt(new this.sdk.EncryptedAttachment(bytes, JSON.stringify({ v, key, iv, hashes })));
  }

  /** What the machine wants sent (keys to upload, devices to look up, to-device messages) goes out; then the state is kept. */
  private async flushLocked(): Promise<void> {
    for (let round = 0; round < 5; round++) {
      const requests = await this.machine.outgoingRequests();
      const wanted = requests.filter((request) => request.type !== this.sdk.RequestType.KeysBackup);
      if (!wanted.length) break;
      for (const request of wanted) await this.sendRequest(request);
    }
    await this.keep();
  }

  /** One of the machine's requests, made to the homeserver, and its answer handed back. */
  private async sendRequest(request: Sdk.KeysUploadRequest | Sdk.KeysQueryRequest | Sdk.KeysClaimRequest | Sdk.ToDeviceRequest | Sdk.SignatureUploadRequest | Sdk.RoomMessageRequest | Sdk.KeysBackupRequest): Promise<void> {
    const { RequestType } = this.sdk;
    const homeserver = this.owner.api();
    const api = {
      call: (method: string, path: string, body: unknown) => homeserver.call(method, path, body).catch((error: unknown) => {
        if (typeof error === 'object' && error !== null) fromHomeserver.add(error);
        throw error;
      }),
    };
    const body = JSON.parse(request.body) as unknown;
    let answer: unknown;
    // What goes to a device or a room was encrypted with ratchets the machine has just moved on: that state is kept
    // before it leaves. A daemon killed after the homeserver took the message, and started again from an older state,
    // would encrypt its next ones from ratchets the person's device has already moved past, and nothing more it sent
    // could be read there.
    if (request instanceof this.sdk.ToDeviceRequest || request instanceof this.sdk.RoomMessageRequest) await this.keep();
    if (request instanceof this.sdk.ToDeviceRequest) {
      answer = await api.call('PUT', `/v3/sendToDevice/${encodeURIComponent(request.event_type)}/${encodeURIComponent(request.txn_id)}`, body);
    } else if (request instanceof this.sdk.RoomMessageRequest) {
      answer = await api.call('PUT', `/v3/rooms/${encodeURIComponent(request.room_id)}/send/${encodeURIComponent(request.event_type)}/${encodeURIComponent(request.txn_id)}`, body);
    } else if (request.type === RequestType.KeysUpload) {
      answer = await api.call('POST', '/v3/keys/upload', body);
    } else if (request.type === RequestType.KeysQuery) {
      answer = await api.call('POST', '/v3/keys/query', body);
    } else if (request.type === RequestType.KeysClaim) {
      answer = await api.call('POST', '/v3/keys/claim', body);
    } else if (request.type === RequestType.SignatureUpload) {
      answer = await api.call('POST', '/v3/keys/signatures/upload', body);
    } else {
      return;
    }
    // A signature upload made outside the machine's own requests has no id: there is nothing to tell it.
    if (request.id === undefined) return;
    await this.machine.markRequestAsSent(request.id, request.type, JSON.stringify(answer));
  }

  /** Writes the machine's state to the profile's database when it changed. */
  private async keep(): Promise<void> {
    const value = (await snapshotOf(this.owner.store, { userId: this.owner.userId, deviceId: this.owner.deviceId })).toString('base64');
    const hash = digest(value);
    if (hash === this.kept) return;
    await this.owner.state.set(value);
    this.kept = hash;
  }

  /** Closes the machine once what it is doing is done. */
  async close(): Promise<void> {
    await this.queue;
    if (this.closed) return;
    this.closed = true;
    this.machine.close();
  }
}

const digest = (value: string): string => createHash('sha256').update(value).digest('base64');
