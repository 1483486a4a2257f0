/**
 * A person whose client encrypts, as Element does: a device of their own
 * driven by the Matrix crypto library's OlmMachine (the library the gateway
 * uses, in memory here), its keys uploaded, the devices of a room's members
 * looked up, Olm sessions claimed, room keys shared over to-device messages,
 * and every encrypted event of their sync decrypted before it is looked at.
 */
import * as sdk from '@matrix-org/matrix-sdk-crypto-wasm';
import { MatrixPerson, type Homeserver } from './matrix-homeserver.ts';

export class EncryptedPerson extends MatrixPerson {
  private machine?: sdk.OlmMachine;
  private queue: Promise<unknown> = Promise.resolve();
  /** Encrypted events that could not be decrypted, as they came. */
  readonly undecrypted: Record<string, any>[] = [];
  /** Room key shares made but not sent yet (see sayEncrypted's shareKeys). */
  private withheld: sdk.ToDeviceRequest[] = [];

  private constructor(hs: Homeserver, localpart: string) {
    super(hs, localpart);
  }

  /** A person and their device, its keys uploaded. */
  static async make(hs: Homeserver, localpart: string): Promise<EncryptedPerson> {
    const person = new EncryptedPerson(hs, localpart);
    person.crypto = { sync: (sync) => person.receive(sync), decrypt: (room, event) => person.decryptEvent(room, event) };
    person.machine = await sdk.OlmMachine.initialize(new sdk.UserId(person.userId), new sdk.DeviceId(person.deviceId));
    await person.exclusive(() => person.flush());
    return person;
  }

  private exclusive<T>(work: () => Promise<T>): Promise<T> {
    const next = this.queue.then(work);
    this.queue = next.catch(() => undefined);
    return next;
  }

  private get olm(): sdk.OlmMachine {
    if (!this.machine) throw new Error('the device is not made yet');
    return this.machine;
  }

  /** The device's public ed25519 key. */
  get fingerprint(): string {
    return this.olm.identityKeys.ed25519.toBase64();
  }

  private async receive(sync: Record<string, any>): Promise<void> {
    if (!this.machine) return;
    await this.exclusive(async () => {
      const counts = new Map<string, number>(Object.entries(sync.device_one_time_keys_count ?? {}));
      const changed = (sync.device_lists?.changed ?? []).map((id: string) => new sdk.UserId(id));
      await this.olm.receiveSyncChanges(JSON.stringify(sync.to_device?.events ?? []), new sdk.DeviceLists(changed, []), counts,
        new Set(sync.device_unused_fallback_key_types ?? []), new sdk.DecryptionSettings(sdk.TrustRequirement.Untrusted));
      await this.flush();
    });
  }

  private decryptEvent(room: string, event: Record<string, any>): Promise<Record<string, any>> {
    return this.exclusive(async () => {
      try {
        const decrypted = await this.olm.decryptRoomEvent(JSON.stringify(event), new sdk.RoomId(room), new sdk.DecryptionSettings(sdk.TrustRequirement.Untrusted));
        const clear = JSON.parse(decrypted.event);
        return { ...event, type: clear.type, content: clear.content, decrypted: { senderDevice: decrypted.senderDevice?.toString(), senderKey: decrypted.senderCurve25519Key } };
      } catch (error) {
        const reason = (error as { description?: string }).description ?? String(error);
        this.undecrypted.push({ ...event, room_id: room, error: reason });
        // Kept as it came, with why it could not be read (shown when a wait for a message fails).
        return { ...event, error: reason };
      }
    });
  }

  /** Sends what the machine wants sent, and tells it the answers. */
  private async flush(): Promise<void> {
    for (let round = 0; round < 5; round++) {
      const requests = await this.olm.outgoingRequests();
      if (!requests.length) return;
      for (const request of requests) await this.send(request);
    }
  }

  private async send(request: Awaited<ReturnType<sdk.OlmMachine['outgoingRequests']>>[number]): Promise<void> {
    const body = JSON.parse(request.body);
    let answer: { status: number; body: unknown };
    if (request instanceof sdk.ToDeviceRequest) answer = await this.api('PUT', `/client/v3/sendToDevice/${encodeURIComponent(request.event_type)}/${encodeURIComponent(request.txn_id)}`, body);
    else if (request instanceof sdk.RoomMessageRequest) answer = await this.api('PUT', `/client/v3/rooms/${encodeURIComponent(request.room_id)}/send/${encodeURIComponent(request.event_type)}/${encodeURIComponent(request.txn_id)}`, body);
    else if (request.type === sdk.RequestType.KeysUpload) answer = await this.api('POST', '/client/v3/keys/upload', body);
    else if (request.type === sdk.RequestType.KeysQuery) answer = await this.api('POST', '/client/v3/keys/query', body);
    else if (request.type === sdk.RequestType.KeysClaim) answer = await this.api('POST', '/client/v3/keys/claim', body);
    else if (request.type === sdk.RequestType.SignatureUpload) answer = await this.api('POST', '/client/v3/keys/signatures/upload', body);
    else return;
    if (answer.status !== 200) throw new Error(`${request.type}: ${JSON.stringify(answer.body)}`);
    if (request.id !== undefined) await this.olm.markRequestAsSent(request.id, request.type, JSON.stringify(answer.body));
  }

  /** The room's joined members, from the homeserver. */
  private async members(room: string): Promise<string[]> {
    const joined = await this.api<{ joined: Record<string, unknown> }>('GET', `/client/v3/rooms/${encodeURIComponent(room)}/joined_members`);
    if (joined.status !== 200) throw new Error(`joined_members: ${JSON.stringify(joined.body)}`);
    return Object.keys(joined.body.joined);
  }

  /** Encrypts a message for the room's members (sharing the room key with their devices first), as Element does, and sends it. */
  async sayEncrypted(room: string, text: string | Record<string, unknown>, options: { shareKeys?: boolean } = {}): Promise<string> {
    const content = await this.exclusive(async () => {
      const members = await this.members(room);
      const ids = () => members.map((id) => new sdk.UserId(id));
      await this.olm.updateTrackedUsers(ids());
      await this.flush();
      const claim = await this.olm.getMissingSessions(ids());
      if (claim) await this.send(claim);
      const settings = new sdk.EncryptionSettings();
      settings.sharingStrategy = sdk.CollectStrategy.allDevices();
      // Without sharing, the message goes out but no one is sent its key (a device that lost it, a key that never came).
      const shares = await this.olm.shareRoomKey(new sdk.RoomId(room), ids(), settings);
      if (options.shareKeys === false) this.withheld.push(...shares);
      else for (const request of shares) await this.send(request);
      return this.olm.encryptRoomEvent(new sdk.RoomId(room), 'm.room.message', JSON.stringify(typeof text === 'string' ? { msgtype: 'm.text', body: text } : text));
    });
    const sent = await this.api<{ event_id: string }>('PUT', `/client/v3/rooms/${encodeURIComponent(room)}/send/m.room.encrypted/e${Date.now()}.${Math.random().toString(36).slice(2)}`, JSON.parse(content));
    if (sent.status !== 200) throw new Error(`send: ${JSON.stringify(sent.body)}`);
    return sent.body.event_id;
  }

  /** Encrypts a file as clients do in an encrypted room, uploads it, and sends it (content.file holds its address and key). */
  async sendEncryptedFile(room: string, name: string, bytes: Buffer, mimetype: string): Promise<string> {
    const encrypted = sdk.Attachment.encrypt(new Uint8Array(bytes));
    const info = JSON.parse(encrypted.mediaEncryptionInfo!);
    const url = await this.upload(Buffer.from(encrypted.encryptedData), 'application/octet-stream');
    return this.sayEncrypted(room, { msgtype: 'm.file', body: name, file: { ...info, url }, info: { mimetype, size: bytes.length } });
  }

  /** Sends the room key shares held back: the keys come late. */
  async releaseKeys(): Promise<void> {
    await this.exclusive(async () => {
      for (const request of this.withheld.splice(0)) await this.send(request);
    });
  }

  override async quit(): Promise<void> {
    await super.quit();
    await this.queue;
    this.machine?.close();
  }
}
