/**
 * Where a Matrix account's end-to-end encryption keys live between starts.
 *
 * The crypto library (@matrix-org/matrix-sdk-crypto-wasm) keeps its state in
 * IndexedDB, which Node does not have: an in-memory IndexedDB
 * (fake-indexeddb) stands in for it, and its databases are written out whole
 * into the profile's database (SQLite or PostgreSQL) after every change that
 * matters, and read back before the library opens them. What is written is
 * what the library put in IndexedDB: every value there is encrypted with its
 * store key (itself locked with the passphrase kept in the secret store), so
 * the profile's database holds no key in the clear.
 */
import { deserialize, serialize } from 'node:v8';

interface StoreShape {
  name: string;
  keyPath: string | string[] | null;
  autoIncrement: boolean;
  indexes: { name: string; keyPath: string | string[]; unique: boolean; multiEntry: boolean }[];
  records: [StoreKey, unknown][];
}
interface DatabaseShape { name: string; version: number; stores: StoreShape[] }
/** The few parts of the IndexedDB API used here (the project's TypeScript has no DOM library). */
interface Request<T> { result: T; error: unknown; onsuccess: (() => void) | null; onerror: (() => void) | null }
interface OpenRequest extends Request<Database> { onupgradeneeded: (() => void) | null }
interface Index { keyPath: string | string[]; unique: boolean; multiEntry: boolean }
interface ObjectStore {
  keyPath: string | string[] | null;
  autoIncrement: boolean;
  indexNames: Iterable<string>;
  index(name: string): Index;
  getAll(): Request<unknown[]>;
  getAllKeys(): Request<StoreKey[]>;
  put(value: unknown, key?: StoreKey): unknown;
  createIndex(name: string, keyPath: string | string[], options: { unique: boolean; multiEntry: boolean }): unknown;
}
interface Transaction { objectStore(name: string): ObjectStore; error: unknown; oncomplete: (() => void) | null; onerror: (() => void) | null; onabort: (() => void) | null }
interface Database {
  version: number;
  objectStoreNames: Iterable<string>;
  transaction(names: string[], mode: 'readonly' | 'readwrite'): Transaction;
  createObjectStore(name: string, options: { keyPath: string | string[] | null; autoIncrement: boolean }): ObjectStore;
  close(): void;
}
interface Factory {
  open(name: string, version?: number): OpenRequest;
  databases(): Promise<{ name?: string }[]>;
}
type StoreKey = string | number | Date | ArrayBufferView | ArrayBuffer | StoreKey[];

/** What a snapshot holds: the databases of one store, and whose device they are. */
export interface Snapshot { userId: string; deviceId: string; databases: DatabaseShape[] }

let installed: Factory | undefined;

/** The in-memory IndexedDB of this process, put where the crypto library looks for it (the global scope), once. */
export async function indexedDb(): Promise<Factory> {
  if (installed) return installed;
  const fake = await import('fake-indexeddb') as Record<string, unknown>;
  const scope = globalThis as Record<string, unknown>;
  for (const [name, value] of Object.entries(fake)) {
    if (name.startsWith('IDB') && scope[name] === undefined) scope[name] = value;
  }
  scope.indexedDB ??= fake.indexedDB;
  installed = scope.indexedDB as Factory;
  return installed;
}

const done = <T>(request: Request<T>): Promise<T> => new Promise((resolve, reject) => {
  request.onsuccess = () => resolve(request.result);
  request.onerror = () => reject(request.error ?? new Error('IndexedDB request failed'));
});

const finished = (transaction: Transaction): Promise<void> => new Promise((resolve, reject) => {
  transaction.oncomplete = () => resolve();
  transaction.onerror = () => reject(transaction.error ?? new Error('IndexedDB transaction failed'));
  transaction.onabort = () => reject(transaction.error ?? new Error('IndexedDB transaction aborted'));
});

/** The names of the databases the library made for the store named `store` (it adds "::" and a part to it). */
async function databasesOf(factory: Factory, store: string): Promise<string[]> {
  return (await factory.databases()).map((info) => info.name ?? '').filter((name) => name.startsWith(`${store}::`));
}

/** Every database of a store, as bytes (the structured clone's own encoding, which keeps binary values as they are). */
export async function snapshotOf(store: string, owner: { userId: string; deviceId: string }): Promise<Buffer> {
  const factory = await indexedDb();
  const databases: DatabaseShape[] = [];
  for (const name of await databasesOf(factory, store)) {
    const db = await done(factory.open(name));
    try {
      const names = [...db.objectStoreNames];
      const stores: StoreShape[] = [];
      if (names.length) {
        const transaction = db.transaction(names, 'readonly');
        for (const storeName of names) {
          const objects = transaction.objectStore(storeName);
          const [keys, values] = await Promise.all([done(objects.getAllKeys()), done(objects.getAll())]);
          stores.push({
            name: storeName, keyPath: objects.keyPath, autoIncrement: objects.autoIncrement,
            indexes: [...objects.indexNames].map((indexName) => {
              const index = objects.index(indexName);
              return { name: indexName, keyPath: index.keyPath, unique: index.unique, multiEntry: index.multiEntry };
            }),
            records: keys.map((key, at) => [key, values[at]]),
          });
        }
        await finished(transaction);
      }
      databases.push({ name, version: db.version, stores });
    } finally {
      db.close();
    }
  }
  return serialize({ ...owner, databases } satisfies Snapshot);
}

/** Reads a snapshot's bytes; throws when they are not one. */
export function readSnapshot(bytes: Buffer): Snapshot {
  const value = deserialize(bytes) as Snapshot;
  if (typeof value?.userId !== 'string' || typeof value.deviceId !== 'string' || !Array.isArray(value.databases)) throw new Error('the stored encryption state is damaged');
  return value;
}

/** Puts a snapshot's databases back under a store name this process has not used yet. */
export async function restoreSnapshot(store: string, snapshot: Snapshot): Promise<void> {
  const factory = await indexedDb();
  for (const database of snapshot.databases) {
    const suffix = database.name.slice(database.name.indexOf('::'));
    const opening = factory.open(`${store}${suffix}`, database.version);
    opening.onupgradeneeded = () => {
      const db = opening.result;
      for (const shape of database.stores) {
        const objects = db.createObjectStore(shape.name, { keyPath: shape.keyPath, autoIncrement: shape.autoIncrement });
        for (const index of shape.indexes) objects.createIndex(index.name, index.keyPath, { unique: index.unique, multiEntry: index.multiEntry });
      }
    };
    const db = await done(opening);
    try {
      const filled = database.stores.filter((shape) => shape.records.length);
      if (!filled.length) continue;
      const transaction = db.transaction(filled.map((shape) => shape.name), 'readwrite');
      for (const shape of filled) {
        const objects = transaction.objectStore(shape.name);
        for (const [key, value] of shape.records) {
          if (shape.keyPath === null) objects.put(value, key);
          else objects.put(value);
        }
      }
      await finished(transaction);
    } finally {
      db.close();
    }
  }
}
