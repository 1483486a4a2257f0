/**
 * The browser's device identity: an Ed25519 key pair kept in IndexedDB, with
 * the device token the gateway issued to it. WebCrypto holds the key where the
 * page is a secure context (https, or loopback); elsewhere (plain http on a
 * LAN address) a small pure-JS implementation, loaded only then, does. The id
 * and the signed string are those of every device (see the CLI's).
 */
const DB = 'gateway-control-ui';
const STORE = 'device';

interface StoredDevice {
  /** A non-extractable WebCrypto key, or the raw 32-byte secret of the fallback. */
  privateKey: CryptoKey | Uint8Array;
  publicKey: string;
  id: string;
  deviceToken?: string;
}

export interface DeviceIdentity {
  id: string;
  publicKey: string;
  sign(text: string): Promise<string>;
  deviceToken(): string | undefined;
  setDeviceToken(token: string | undefined): Promise<void>;
}

export const base64url = (bytes: Uint8Array): string => btoa(String.fromCharCode(...bytes)).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');

function open(): Promise<IDBDatabase> {
  return new Promise((resolve, reject) => {
    const request = indexedDB.open(DB, 1);
    request.onupgradeneeded = () => request.result.createObjectStore(STORE);
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });
}

async function transact<T>(mode: IDBTransactionMode, run: (store: IDBObjectStore) => IDBRequest<T>): Promise<T> {
  const db = await open();
  try {
    return await new Promise<T>((resolve, reject) => {
      const request = run(db.transaction(STORE, mode).objectStore(STORE));
      request.onsuccess = () => resolve(request.result);
      request.onerror = () => reject(request.error);
    });
  } finally {
    db.close();
  }
}

const read = (key: string) => transact<StoredDevice | undefined>('readonly', (store) => store.get(key) as IDBRequest<StoredDevice | undefined>);
const write = (key: string, value: StoredDevice) => transact('readwrite', (store) => store.put(value, key));

/** Whether this page can keep an Ed25519 key in WebCrypto. */
async function webCryptoEd25519(): Promise<boolean> {
  if (!globalThis.isSecureContext || !crypto.subtle) return false;
  try {
    await crypto.subtle.generateKey({ name: 'Ed25519' }, false, ['sign', 'verify']);
    return true;
  } catch {
    return false;
  }
}

async function sha256(bytes: Uint8Array): Promise<Uint8Array> {
  if (globalThis.isSecureContext && crypto.subtle) return new Uint8Array(await crypto.subtle.digest('SHA-256', bytes as BufferSource));
  const { fallback } = await import('./device-fallback.ts');
  return fallback.sha256(bytes);
}

async function create(): Promise<StoredDevice> {
  let privateKey: CryptoKey | Uint8Array;
  let raw: Uint8Array;
  if (await webCryptoEd25519()) {
    const pair = await crypto.subtle.generateKey({ name: 'Ed25519' }, false, ['sign', 'verify']) as CryptoKeyPair;
    privateKey = pair.privateKey;
    raw = new Uint8Array(await crypto.subtle.exportKey('raw', pair.publicKey));
  } else {
    const { fallback } = await import('./device-fallback.ts');
    privateKey = fallback.secretKey();
    raw = fallback.publicKey(privateKey);
  }
  return { privateKey, publicKey: base64url(raw), id: base64url(await sha256(raw)) };
}

/** The identity of this browser for one gateway (keys are per origin, as IndexedDB is). */
export async function loadDevice(): Promise<DeviceIdentity> {
  let stored = await read('self');
  if (!stored) {
    stored = await create();
    await write('self', stored);
  }
  const device = stored;
  return {
    id: device.id,
    publicKey: device.publicKey,
    async sign(text) {
      const message = new TextEncoder().encode(text);
      if (device.privateKey instanceof Uint8Array) {
        const { fallback } = await import('./device-fallback.ts');
        return base64url(fallback.sign(message, device.privateKey));
      }
      return base64url(new Uint8Array(await crypto.subtle.sign({ name: 'Ed25519' }, device.privateKey, message)));
    },
    deviceToken: () => device.deviceToken,
    async setDeviceToken(token) {
      device.deviceToken = token;
      await write('self', device);
    },
  };
}

