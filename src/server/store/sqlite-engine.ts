import { statSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';
import { GatewayError } from '../../shared/errors.ts';
import type { Engine, Statement } from './engine.ts';

const SQLITE_CORRUPT = 11;
const SQLITE_NOTADB = 26;

/**
 * Opens the profile's database, refusing one that is damaged instead of
 * failing later with a bare SQLite error, and never taking an emptied file
 * for a new database: SQLite writes a database's header when it makes one, so
 * a file of 0 bytes is a database that lost its content (a truncation, a
 * failed copy), and starting afresh on it would drop every token, device and
 * job without a word.
 */
function openDatabase(path: string): DatabaseSync {
  const size = (() => {
    try {
      return statSync(path).size;
    } catch {
      return undefined;
    }
  })();
  const aside = `mv ${path} ${path}.broken   # the profile then starts with empty state: tokens, devices, jobs and sessions are gone`;
  if (size === 0) {
    throw new GatewayError(`${path} is empty (0 bytes): the profile's database lost its content. It was left as it is.`, {
      hints: [`restore it from a backup (with its -wal file, if any)`, `or set it aside: ${aside}`],
    });
  }
  let db: DatabaseSync | undefined;
  try {
    db = new DatabaseSync(path);
    // Reading the schema reads the header and the first page: a file that is not a database says so here.
    db.prepare('SELECT count(*) FROM sqlite_schema').get();
    return db;
  } catch (error) {
    db?.close();
    const code = ((error as { errcode?: number }).errcode ?? 0) & 0xff;
    const damaged = code === SQLITE_CORRUPT || code === SQLITE_NOTADB;
    throw new GatewayError(`${path} ${damaged ? 'is damaged' : 'cannot be opened'}: ${(error as Error).message}. It was left as it is.`, {
      cause: error,
      hints: damaged ? ['restore it from a backup (with its -wal file, if any)', `or set it aside: ${aside}`] : [`check the file and its folder: ls -l ${path}`],
    });
  }
}

/** WAL pages a connection lets accumulate before it checkpoints during a commit, while no thread does it. */
export const DEFAULT_AUTOCHECKPOINT_PAGES = 4000;

/** The profile's SQLite database in WAL mode, in the daemon's process. */
export class SqliteEngine implements Engine {
  readonly kind = 'sqlite' as const;
  readonly db: DatabaseSync;

  constructor(path: string, synchronous: 'normal' | 'full') {
    this.db = openDatabase(path);
    this.db.exec('PRAGMA journal_mode = WAL');
    this.db.exec(`PRAGMA synchronous = ${synchronous === 'full' ? 'FULL' : 'NORMAL'}`);
    this.db.exec('PRAGMA foreign_keys = ON');
    this.db.exec('PRAGMA busy_timeout = 5000');
    // A larger page cache and fewer, larger checkpoints: the daemon is the database's only writer.
    this.db.exec('PRAGMA cache_size = -16000');
    this.setAutocheckpoint();
    this.db.exec('PRAGMA temp_store = MEMORY');
  }

  /** How many WAL pages this connection lets accumulate before it checkpoints inline during a commit. */
  setAutocheckpoint(pages = DEFAULT_AUTOCHECKPOINT_PAGES): void {
    this.db.exec(`PRAGMA wal_autocheckpoint = ${Math.trunc(pages)}`);
  }

  prepare(sql: string): Statement {
    return this.db.prepare(sql) as Statement;
  }

  exec(sql: string): void {
    this.db.exec(sql);
  }

  close(): void {
    if (this.db.isOpen) this.db.close();
  }
}
