import type { EngineKind } from './dialect.ts';

export type Row = Record<string, unknown>;
/** A statement's parameter; arrays only in statements written for PostgreSQL alone (dialect.ts). */
export type Parameter = string | number | bigint | null | Uint8Array | readonly (string | number | null)[];

/** A statement compiled once and run many times, as node:sqlite's StatementSync offers it. */
export interface Statement {
  run(...params: Parameter[]): { changes: number | bigint };
  get(...params: Parameter[]): unknown;
  all(...params: Parameter[]): unknown[];
}

/** One connection to the profile's state: SQLite in the daemon's process, or PostgreSQL. */
export interface Engine {
  readonly kind: EngineKind;
  prepare(sql: string): Statement;
  /** Statements without parameters, possibly several. */
  exec(sql: string): void;
  close(): void;
}
