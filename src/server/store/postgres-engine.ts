/**
 * PostgreSQL behind the store's synchronous interface. The features run their
 * statements as they do on SQLite, one at a time on the daemon's thread; each
 * goes to the connection's own thread (postgres-worker.ts), and the daemon's
 * thread waits for its answer, bounded by the statement timeout. A lost
 * connection makes statements fail at once as "unreachable" (no waiting on a
 * dead server) while that thread reconnects with backoff.
 */
import type { MessagePort, Worker } from 'node:worker_threads';

/** Loaded when a daemon opens PostgreSQL: one on SQLite never starts this thread. */
const threads = () => process.getBuiltinModule('node:worker_threads');
import { GatewayError } from '../../shared/errors.ts';
import { redactedUrl } from '../../shared/store-url.ts';
import { numberedParameters } from './dialect.ts';
import type { Engine, Parameter, Statement } from './engine.ts';
import type { WireError } from './postgres-worker.ts';

export interface PostgresOptions {
  url: string;
  password?: string;
  applicationName: string;
  statementTimeoutMs?: number;
  connectTimeoutMs?: number;
}

/** An error PostgreSQL or the connection gave, with its SQLSTATE or system code. */
export class PostgresError extends Error {
  readonly code?: string;
  readonly unreachable: boolean;

  constructor(error: WireError) {
    super(error.message);
    this.name = 'PostgresError';
    this.code = error.code;
    this.unreachable = error.unreachable === true;
  }
}

/** The error of a daemon or command that cannot connect to the store's PostgreSQL, with what to check. */
export function unreachableStore(url: string, error: unknown): GatewayError {
  const found = error as { message?: string; code?: string };
  const message = String(found?.message ?? error);
  return new GatewayError(`cannot reach the store's PostgreSQL at ${redactedUrl(url)}: ${message}`, {
    cause: error,
    hints: found?.code === '28P01' || /password/i.test(message)
      ? ['set its password: gateway secrets set store.password (or PGPASSWORD in the daemon\'s environment)']
      : ['check that the server runs and the URL names the right host, port and database'],
  });
}

type Answer = { id: number; ok?: true; changes?: number; row?: unknown; rows?: unknown[]; error?: WireError };

export class PostgresEngine implements Engine {
  readonly kind = 'postgres' as const;
  private readonly worker: Worker;
  private readonly port: MessagePort;
  private readonly receive: typeof import('node:worker_threads').receiveMessageOnPort;
  private readonly flag: Int32Array;
  private readonly waitMs: number;
  private next = 0;
  private readonly names = new Map<string, Statement>();
  private closed = false;
  /** Transaction control waiting for the next statement (see exec). */
  private deferred: string[] = [];
  /** Whether the last COMMIT or ROLLBACK was never sent: its transaction had no statement. */
  elided = false;
  private readonly listeners = new Set<(state: { up: boolean; message?: string; code?: string }) => void>();

  constructor(options: PostgresOptions) {
    const statementTimeoutMs = options.statementTimeoutMs ?? 10_000;
    const connectTimeoutMs = options.connectTimeoutMs ?? 5_000;
    this.waitMs = Math.max(statementTimeoutMs, connectTimeoutMs) + 5000;
    const signal = new SharedArrayBuffer(4);
    this.flag = new Int32Array(signal);
    const { MessageChannel, Worker, receiveMessageOnPort } = threads();
    this.receive = receiveMessageOnPort;
    const { port1, port2 } = new MessageChannel();
    this.port = port1;
    // The worker's file sits beside this one: .js when built, .ts when run from the sources.
    this.worker = new Worker(new URL(`./postgres-worker.${import.meta.url.endsWith('.ts') ? 'ts' : 'js'}`, import.meta.url), {
      workerData: {
        port: port2, signal, url: options.url, password: options.password, applicationName: options.applicationName,
        statementTimeoutMs, connectTimeoutMs,
      },
      transferList: [port2],
    });
    this.worker.unref();
    this.worker.on('message', (message: { type: string; message?: string; code?: string }) => {
      for (const listener of this.listeners) listener({ up: message.type === 'up', message: message.message, code: message.code });
    });
    this.worker.on('error', () => {});
    try {
      this.call({ op: 'connect' });
    } catch (error) {
      this.close();
      throw unreachableStore(options.url, error);
    }
  }

  /** Called when the connection is lost and when it is back. */
  onConnection(listener: (state: { up: boolean; message?: string; code?: string }) => void): void {
    this.listeners.add(listener);
  }

  /** Sends one request to the connection's thread and waits for its answer. */
  call(request: Record<string, unknown>): Answer {
    if (this.closed) throw new PostgresError({ message: 'the store is closed', unreachable: true });
    const id = ++this.next;
    const prefix = this.deferred;
    if (prefix.length > 0) this.deferred = [];
    this.port.postMessage(prefix.length > 0 ? { ...request, id, prefix } : { ...request, id });
    const deadline = Date.now() + this.waitMs;
    for (;;) {
      Atomics.store(this.flag, 0, 0);
      const received = this.receive(this.port);
      if (received) {
        const answer = received.message as Answer;
        // An answer to a request given up on earlier: it is stale.
        if (answer.id !== id) continue;
        if (answer.error) throw new PostgresError(answer.error);
        return answer;
      }
      const left = deadline - Date.now();
      if (left <= 0 || Atomics.wait(this.flag, 0, 0, left) === 'timed-out') {
        throw new PostgresError({ message: `no answer from PostgreSQL in ${this.waitMs} ms`, unreachable: true });
      }
    }
  }

  prepare(sql: string): Statement {
    let statement = this.names.get(sql);
    if (statement) return statement;
    const text = /\$1\b/.test(sql) ? sql : numberedParameters(sql);
    const name = `s${this.names.size + 1}`;
    const params = (values: Parameter[]) => values.map((value) => (value instanceof Uint8Array ? Buffer.from(value) : value));
    // Statements written for PostgreSQL alone (dialect.ts) number their own parameters and may take arrays.
    statement = {
      run: (...values) => ({ changes: this.call({ op: 'query', mode: 'run', sql: text, name, params: params(values) }).changes ?? 0 }),
      get: (...values) => this.call({ op: 'query', mode: 'get', sql: text, name, params: params(values) }).row,
      all: (...values) => this.call({ op: 'query', mode: 'all', sql: text, name, params: params(values) }).rows ?? [],
    };
    this.names.set(sql, statement);
    return statement;
  }

  /**
   * Transaction control is sent with the next statement that needs it: a
   * savepoint nothing was written under is never sent (nor its release), and
   * BEGIN travels with the transaction's first statement, saving the thread
   * hop of each.
   */
  exec(sql: string): void {
    if (sql === 'BEGIN' || /^SAVEPOINT \w+$/.test(sql)) {
      this.deferred.push(sql);
      return;
    }
    const closes = /^(?:RELEASE|ROLLBACK TO) (\w+)(?:; RELEASE \w+)?$/.exec(sql);
    if (closes && this.deferred.at(-1) === `SAVEPOINT ${closes[1]}`) {
      this.deferred.pop();
      return;
    }
    this.elided = false;
    if ((sql === 'COMMIT' || sql === 'ROLLBACK') && this.deferred[0] === 'BEGIN') {
      // Nothing of the transaction reached the server (and nothing says whether it is reachable).
      this.deferred = [];
      this.elided = true;
      return;
    }
    if (sql === 'ROLLBACK') this.deferred = [];
    this.call({ op: 'exec', sql });
  }

  close(): void {
    if (this.closed) return;
    try {
      this.call({ op: 'close' });
    } catch {
      // already gone
    }
    this.closed = true;
    void this.worker.terminate();
  }
}
