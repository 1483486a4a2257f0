import { statSync } from 'node:fs';
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import { GatewayError } from '../../shared/errors.ts';
import { SQLITE_DIALECT } from './dialect.ts';
import type { Parameter, Row, RunResult, Tx } from './engine.ts';
import type { WriterTurns } from './writer-turns.ts';

const SQLITE_BUSY = 5;
const SQLITE_LOCKED = 6;
const SQLITE_CORRUPT = 11;
const SQLITE_NOTADB = 26;

/** Statements that write (and so take SQLite's write lock when run outside a transaction). */
const WRITES = /^\s*(?:INSERT|UPDATE|DELETE|REPLACE)\b/i;

/** How long a write waits, all told, for another connection of the daemon to let go of the write lock. */
const BUSY_WAIT_MS = 5000;

const isBusy = (error: unknown): boolean => {
  const code = ((error as { errcode?: number } | null)?.errcode ?? 0) & 0xff;
  return code === SQLITE_BUSY || code === SQLITE_LOCKED;
};

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

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

type Mode = 'run' | 'get' | 'all';
type Prepared = { statement: StatementSync; writes: boolean };

export interface SqliteOptions {
  synchronous: 'normal' | 'full';
  /**
   * A thread that may block (a worker thread of the daemon) waits for the
   * write lock in SQLite's busy handler; the daemon's own thread never
   * blocks, and waits for it on timers instead.
   */
  blocking?: boolean;
}

/**
 * The profile's SQLite database in WAL mode, in the daemon's process. Its
 * statements run at once on the calling thread (a statement costs
 * microseconds, less than handing it anywhere); a transaction holds the one
 * connection until it ends, and statements from elsewhere wait their turn
 * meanwhile, so nothing joins a transaction it is not part of.
 */
export class SqliteEngine {
  readonly kind = 'sqlite' as const;
  readonly dialect = SQLITE_DIALECT;
  readonly db: DatabaseSync;
  private readonly prepared = new Map<string, Prepared>();
  /** Whether a transaction (or a statement waiting for the write lock) holds the connection. */
  private held = false;
  private readonly waiting: (() => void)[] = [];
  private readonly blocking: boolean;
  /** Turns at the write lock with another thread of the daemon writing the same file, while it runs (see WriterTurns). */
  turns?: WriterTurns;

  constructor(path: string, options: SqliteOptions) {
    this.blocking = options.blocking === true;
    this.db = openDatabase(path);
    this.db.exec('PRAGMA journal_mode = WAL');
    this.db.exec(`PRAGMA synchronous = ${options.synchronous === 'full' ? 'FULL' : 'NORMAL'}`);
    this.db.exec('PRAGMA foreign_keys = ON');
    this.db.exec(`PRAGMA busy_timeout = ${this.blocking ? BUSY_WAIT_MS : 0}`);
    // A larger page cache and fewer, larger checkpoints: the daemon is the database's only writer.
    this.db.exec('PRAGMA cache_size = -16000');
    this.setAutocheckpoint();
    this.db.exec('PRAGMA temp_store = MEMORY');
  }

  /** How many WAL pages this connection lets accumulate before it checkpoints inline during a commit. */
  setAutocheckpoint(pages = DEFAULT_AUTOCHECKPOINT_PAGES): void {
    this.db.exec(`PRAGMA wal_autocheckpoint = ${Math.trunc(pages)}`);
  }

  private prepare(sql: string): Prepared {
    let prepared = this.prepared.get(sql);
    if (!prepared) {
      prepared = { statement: this.db.prepare(sql), writes: WRITES.test(sql) };
      this.prepared.set(sql, prepared);
    }
    return prepared;
  }

  /** Runs a statement now, on this thread. */
  execute(mode: Mode, sql: string, params: Parameter[]): unknown {
    const { statement } = this.prepare(sql);
    const values = params as Parameters<StatementSync['run']>;
    if (mode === 'run') return { changes: Number(statement.run(...values).changes) } satisfies RunResult;
    if (mode === 'get') return statement.get(...values);
    return statement.all(...values);
  }

  /** A statement on its own: at once while no transaction holds the connection, else in its turn after it. */
  statement(mode: Mode, sql: string, params: Parameter[]): Promise<unknown> {
    if (!this.held && !(this.turns && this.prepare(sql).writes)) {
      try {
        return Promise.resolve(this.execute(mode, sql, params));
      } catch (error) {
        if (this.blocking || !isBusy(error)) return Promise.reject(error);
      }
    }
    return this.exclusive(this.prepare(sql).writes, () => this.execute(mode, sql, params));
  }

  /** Runs work holding the connection (and, for a write, the daemon's turn at the write lock), waiting for the lock on timers. */
  private async exclusive<T>(writes: boolean, work: () => T): Promise<T> {
    await this.acquire();
    const turns = writes ? this.turns : undefined;
    try {
      if (turns) await turns.enter();
      try {
        return await this.patiently(work);
      } finally {
        turns?.leave();
      }
    } finally {
      this.release();
    }
  }

  /** Tries work until the write lock is free (another connection of the daemon holds it), for BUSY_WAIT_MS at most. */
  private async patiently<T>(work: () => T): Promise<T> {
    const until = performance.now() + BUSY_WAIT_MS;
    for (let wait = 1; ; wait = Math.min(wait * 2, 50)) {
      try {
        return work();
      } catch (error) {
        if (this.blocking || !isBusy(error) || performance.now() >= until) throw error;
      }
      await sleep(wait);
    }
  }

  private acquire(): Promise<void> {
    if (!this.held) {
      this.held = true;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  /** Hands the connection to the next in line (it stays held), or frees it. */
  private release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.held = false;
  }

  async transaction<T>(work: (tx: Tx) => Promise<T>): Promise<T> {
    await this.acquire();
    const turns = this.turns;
    try {
      if (turns) await turns.enter();
      try {
        await this.patiently(() => this.db.exec('BEGIN IMMEDIATE'));
        let result: T;
        const committed: (() => void)[] = [];
        try {
          result = await work(new SqliteTx(this, 0, committed));
          this.db.exec('COMMIT');
        } catch (error) {
          // SQLite rolls a transaction back by itself after some failures (a full disk): only what is still open is
          // undone here, and a rollback that fails says less than the error that caused it.
          if (this.db.isTransaction) {
            try {
              this.db.exec('ROLLBACK');
            } catch {
              // the original error is the one to report
            }
          }
          throw error;
        }
        for (const callback of committed) callback();
        return result;
      } finally {
        turns?.leave();
      }
    } finally {
      this.release();
    }
  }

  close(): Promise<void> {
    if (this.db.isOpen) this.db.close();
    return Promise.resolve();
  }
}

const settled = (work: () => unknown): Promise<any> => {
  try {
    return Promise.resolve(work());
  } catch (error) {
    return Promise.reject(error);
  }
};

/** A transaction on the connection (or a savepoint of it): its statements run at once, the connection being its own. */
class SqliteTx implements Tx {
  readonly kind = 'sqlite' as const;
  readonly dialect = SQLITE_DIALECT;
  private readonly engine: SqliteEngine;
  private readonly depth: number;
  private readonly committed: (() => void)[];

  constructor(engine: SqliteEngine, depth: number, committed: (() => void)[]) {
    this.engine = engine;
    this.depth = depth;
    this.committed = committed;
  }

  afterCommit(callback: () => void): void {
    this.committed.push(callback);
  }

  run(sql: string, ...params: Parameter[]): Promise<RunResult> {
    return settled(() => this.engine.execute('run', sql, params));
  }

  get<T = Row>(sql: string, ...params: Parameter[]): Promise<T | undefined> {
    return settled(() => this.engine.execute('get', sql, params));
  }

  all<T = Row>(sql: string, ...params: Parameter[]): Promise<T[]> {
    return settled(() => this.engine.execute('all', sql, params));
  }

  get lost(): boolean {
    return !this.engine.db.isTransaction;
  }

  exec(sql: string): Promise<void> {
    return settled(() => this.engine.db.exec(sql));
  }

  send(sql: string, ...params: Parameter[]): void {
    this.engine.execute('run', sql, params);
  }

  async transaction<T>(work: (tx: Tx) => Promise<T>): Promise<T> {
    const { db } = this.engine;
    const savepoint = `sp${this.depth + 1}`;
    const mark = this.committed.length;
    db.exec(`SAVEPOINT ${savepoint}`);
    try {
      const result = await work(new SqliteTx(this.engine, this.depth + 1, this.committed));
      db.exec(`RELEASE ${savepoint}`);
      return result;
    } catch (error) {
      // What waited for the commit of what was undone waits for nothing.
      this.committed.length = mark;
      if (db.isTransaction) {
        try {
          db.exec(`ROLLBACK TO ${savepoint}; RELEASE ${savepoint}`);
        } catch {
          // the original error is the one to report
        }
      }
      throw error;
    }
  }
}
