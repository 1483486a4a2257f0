import type { EngineKind } from './dialect.ts';

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
