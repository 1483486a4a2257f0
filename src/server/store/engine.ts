/** The engine under the store: for what the store shows of itself (gateway store status, metrics); features ask its Dialect instead. */
export type EngineKind = 'sqlite' | 'postgres';

export type Row = Record<string, unknown>;
/** A statement's parameter; arrays only in statements written for PostgreSQL alone (dialect.ts). */
export type Parameter = string | number | bigint | null | Uint8Array | readonly (string | number | null)[];

export interface RunResult {
  changes: number;
}

/**
 * What the features run their SQL through: the store (each statement on its
 * own) or an open transaction. Every statement is asynchronous: on PostgreSQL
 * it is a round trip, and the daemon's thread serves everything else while it
 * travels. Statements are portable SQL with `?` parameters.
 */
export interface Db {
  readonly kind: EngineKind;
  /** What the engine under it does its own way: what features ask instead of its name. */
  readonly dialect: Dialect;
  run(sql: string, ...params: Parameter[]): Promise<RunResult>;
  get<T = Row>(sql: string, ...params: Parameter[]): Promise<T | undefined>;
  all<T = Row>(sql: string, ...params: Parameter[]): Promise<T[]>;
  /**
   * Runs work in one transaction: all of it commits, or none of it does.
   * Inside another transaction it is a savepoint of that one. The work runs
   * its statements through `tx`, one after another, and waits for nothing but
   * the store while the transaction is open.
   */
  transaction<T>(work: (tx: Tx) => Promise<T>): Promise<T>;
}

/** An open transaction (or a savepoint of one). */
export interface Tx extends Db {
  /**
   * Whether the whole transaction is gone: SQLite rolls a transaction back by
   * itself after some failures (a full disk), savepoints and all. Code that
   * catches a savepoint's failure to go on must then rethrow instead: what it
   * would write next would commit on its own.
   */
  readonly lost: boolean;
  /** Statements without parameters, possibly several: a migration's. */
  exec(sql: string): Promise<void>;
  /**
   * A write whose answer the work does not wait for: it goes out at once
   * (on PostgreSQL, with what follows it and the COMMIT in one round trip),
   * and its failure fails the transaction. For a transaction's last writes.
   */
  send(sql: string, ...params: Parameter[]): void;
  /** Runs once the whole transaction has committed (never, if it rolls back): what others may act on only then. */
  afterCommit(callback: () => void): void;
}

/** Whether statements run in a transaction (else each on its own). */
export const inTransaction = (db: Db): db is Tx => 'afterCommit' in db;

/**
 * What a feature asks of the engine under the store, by what it needs rather
 * than by the engine's name: how the database is shared and written, and the
 * SQL each engine spells its own way. SQLite's and PostgreSQL's are side by
 * side in dialect.ts.
 */
export interface Dialect {
  readonly kind: EngineKind;
  /**
   * Several daemons may work on the database at once (PostgreSQL): a job's
   * claim holds only while its daemon renews it. Otherwise the database is a
   * file on this host that this daemon alone opens (SQLite): other threads of
   * the daemon may open it by its path, and its write-ahead log needs
   * checkpoints.
   */
  readonly shared: boolean;
  /**
   * Transactions take turns at one write lock, and a statement costs
   * microseconds (SQLite): work goes one step after another, each step in a
   * savepoint that undoes only its own writes. Otherwise (PostgreSQL)
   * transactions run side by side and each statement is a round trip: work
   * goes side by side, in as few statements as it can.
   */
  readonly oneWriter: boolean;
  /** Parameters may be arrays (PostgreSQL's unnest): a group of rows in one statement, whatever its size. */
  readonly arrays: boolean;
  /**
   * A subquery that picks rows to take (claim): on a database several daemons
   * share, the rows are locked as they are picked, skipping those another
   * transaction is taking, so no two take one row and none waits for another.
   */
  skipLocked(select: string): string;
  /**
   * Makes the rest of a transaction take turns with every other transaction
   * that names the same thing, until it ends (PostgreSQL's advisory lock; on
   * SQLite transactions take turns already).
   */
  takeTurn(tx: Tx, name: string): Promise<void>;
  /** A full-text match (see FullTextSearch), as the parts of a SELECT. */
  fullText(search: FullTextSearch): FullTextMatch;
  /**
   * A condition that holds when the daemon whose instance id is in `column`
   * has no session left on the database server (PostgreSQL: every connection
   * of a daemon names its instance id in its application name), so it is
   * gone; never on a database only this daemon opens.
   */
  daemonGone(column: string): string;
}

/** A full-text search of a table's text: every word must occur in it. */
export interface FullTextSearch {
  /** The table searched, and the alias the query gives it. */
  table: string;
  alias: string;
  /** Its column of text. */
  column: string;
  /** SQLite's FTS5 index over that column (its first column), knowing each row by the table's id. */
  index: string;
  /** Words, never operators of either engine's syntax. */
  words: readonly string[];
}

/**
 * A full-text match as the parts of a SELECT, written
 * `SELECT <alias>.*, <excerpt> AS excerpt FROM <from> WHERE <where> AND ...
 * ORDER BY <rank>, ...`: its one parameter, `param`, then comes before the
 * parameters of the rest.
 */
export interface FullTextMatch {
  from: string;
  where: string;
  /** An excerpt around what matched, the matches [marked]. */
  excerpt: string;
  /** Best match first. */
  rank: string;
  param: string;
}
