/**
 * The PostgreSQL connection behind the daemon's store, on a thread of its own.
 * The daemon's thread asks for one statement at a time and waits for the
 * answer (see postgres-engine.ts); this thread owns the connection, reconnects
 * with backoff when it is lost, and says so to the daemon.
 */
import { type MessagePort, parentPort, workerData } from 'node:worker_threads';
import pg from 'pg';
import { withPassword } from '../../shared/store-url.ts';

interface Data {
  port: MessagePort;
  signal: SharedArrayBuffer;
  url: string;
  password?: string;
  applicationName: string;
  statementTimeoutMs: number;
  connectTimeoutMs: number;
}

const data = workerData as Data;
const flag = new Int32Array(data.signal);

// Rows read as SQLite gives them: 64-bit integers and numerics as numbers (the store keeps times in milliseconds), booleans as 1 and 0.
pg.types.setTypeParser(20, (value) => Number(value));
pg.types.setTypeParser(1700, (value) => Number(value));
pg.types.setTypeParser(16, (value) => (value === 't' ? 1 : 0));

interface Request {
  id: number;
  op: 'connect' | 'query' | 'exec' | 'close';
  sql?: string;
  params?: unknown[];
  name?: string;
  mode?: 'run' | 'get' | 'all';
  /** Transaction control to run first (BEGIN, SAVEPOINT): see PostgresEngine.exec. */
  prefix?: string[];
}

export interface WireError {
  message: string;
  code?: string;
  unreachable?: boolean;
}

const CONNECTION_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', '57P01', '57P02', '57P03', '53300']);

/** Whether an error means the connection is gone (rather than the statement being wrong). */
function lostConnection(error: { code?: string; message?: string }): boolean {
  const code = error.code ?? '';
  if (CONNECTION_CODES.has(code) || code.startsWith('08')) return true;
  return /Connection terminated|connection timeout|Client has encountered a connection error|Query read timeout|not queryable/i.test(error.message ?? '');
}

function wire(error: unknown): WireError {
  const found = error as { message?: string; code?: string };
  const unreachable = lostConnection(found);
  return { message: String(found.message ?? error), ...(found.code ? { code: found.code } : {}), ...(unreachable ? { unreachable } : {}) };
}

let client: pg.Client | undefined;
let down: WireError | undefined;
let retry: NodeJS.Timeout | undefined;
let backoffMs = 250;
let closing = false;

function report(message: Record<string, unknown>): void {
  parentPort!.postMessage(message);
}

async function connect(): Promise<pg.Client> {
  const next = new pg.Client({
    connectionString: withPassword(data.url, data.password),
    application_name: data.applicationName,
    statement_timeout: data.statementTimeoutMs,
    query_timeout: data.statementTimeoutMs + 2000,
    connectionTimeoutMillis: data.connectTimeoutMs,
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
  });
  next.on('error', (error) => lose(next, error));
  next.on('end', () => lose(next, new Error('Connection terminated')));
  try {
    await next.connect();
  } catch (error) {
    void next.end().catch(() => {});
    throw error;
  }
  return next;
}

/** The connection broke: answer "unreachable" until a new one is made, in the background, with backoff. */
function lose(which: pg.Client, error: unknown): void {
  if (client !== which || closing) return;
  client = undefined;
  void which.end().catch(() => {});
  markDown(wire(error));
}

function markDown(error: WireError): void {
  const first = !down;
  down = { ...error, unreachable: true };
  if (first) report({ type: 'down', message: down.message, code: down.code });
  schedule();
}

function schedule(): void {
  if (retry || closing) return;
  retry = setTimeout(async () => {
    retry = undefined;
    try {
      client = await connect();
      down = undefined;
      backoffMs = 250;
      report({ type: 'up' });
    } catch (error) {
      backoffMs = Math.min(backoffMs * 2, 5000);
      down = { ...wire(error), unreachable: true };
      schedule();
    }
  }, backoffMs);
}

function reply(message: Record<string, unknown>): void {
  data.port.postMessage(message);
  Atomics.store(flag, 0, 1);
  Atomics.notify(flag, 0);
}

async function handle(request: Request): Promise<void> {
  if (request.op === 'close') {
    closing = true;
    clearTimeout(retry);
    await client?.end().catch(() => {});
    reply({ id: request.id, ok: true });
    process.exit(0);
  }
  if (request.op === 'connect') {
    try {
      client = await connect();
      reply({ id: request.id, ok: true });
    } catch (error) {
      reply({ id: request.id, error: wire(error) });
    }
    return;
  }
  const current = client;
  if (!current) {
    reply({ id: request.id, error: down ?? { message: 'not connected', unreachable: true } });
    return;
  }
  try {
    for (const statement of request.prefix ?? []) await current.query(statement);
    if (request.op === 'exec') {
      await current.query(request.sql!);
      reply({ id: request.id, ok: true });
      return;
    }
    const result = await current.query({ name: request.name, text: request.sql!, values: request.params });
    if (request.mode === 'run') reply({ id: request.id, changes: result.rowCount ?? 0 });
    else if (request.mode === 'get') reply({ id: request.id, row: result.rows[0] });
    else reply({ id: request.id, rows: result.rows });
  } catch (error) {
    const answer = wire(error);
    if (answer.unreachable) lose(current, error);
    reply({ id: request.id, error: answer });
  }
}

// One request at a time, in order: the daemon's thread waits for each answer before it asks again.
let chain = Promise.resolve();
data.port.on('message', (request: Request) => {
  chain = chain.then(() => handle(request));
});
