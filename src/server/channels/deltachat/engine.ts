/**
 * Delta Chat's engine, deltachat-rpc-server (@deltachat/stdio-rpc-server-<platform>-<arch>):
 * one process per account, its data folder given by DC_ACCOUNTS_PATH, spoken
 * to in JSON-RPC 2.0, one request or answer a line on its stdin and stdout.
 * It answers requests in any order (each is matched by its id), and ends
 * when its stdin closes, so an engine whose gateway died goes with it.
 */
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';

/** The most of one line the engine writes (an answer or an event); a longer one ends the engine. */
const MAX_LINE_BYTES = 32 * 1024 * 1024;
/** How long a call waits for its answer unless it says otherwise. */
const CALL_TIMEOUT_MS = 60_000;
/** A stopping engine gets this long to close its connections and database once its stdin closes, then it is killed. */
const STOP_GRACE_MS = 5000;
/** Lines of the engine's own log kept, to say why it ended. */
const STDERR_LINES = 20;

export { enginePath } from '../../../shared/deltachat-engine.ts';

/** The engine answered a call with a JSON-RPC error. */
export class EngineError extends Error {
  readonly code: number;

  constructor(code: number, message: string) {
    super(message);
    this.name = 'EngineError';
    this.code = code;
  }
}

/** The engine is gone (it ended, or was never started): what was asked of it is not done. */
export class EngineGone extends Error {}

interface Pending { resolve: (value: unknown) => void; reject: (error: Error) => void; timer?: NodeJS.Timeout }

export class Engine {
  private readonly child: ChildProcessWithoutNullStreams;
  private readonly pending = new Map<number, Pending>();
  private serial = 0;
  private buffer = '';
  private readonly stderr: string[] = [];
  private gone?: EngineGone;
  /** Resolves when the process has ended, with why. */
  readonly ended: Promise<string>;

  /** Starts an engine on a data folder; `log` hears the engine's own log lines. */
  constructor(binary: string, folder: string, log: (line: string) => void) {
    // Nothing of the gateway's environment (its secrets) reaches the engine: its folder, and where to find nothing else.
    this.child = spawn(binary, [], { env: { DC_ACCOUNTS_PATH: folder, RUST_LOG: 'info', PATH: '/usr/bin:/bin' }, stdio: ['pipe', 'pipe', 'pipe'] });
    this.child.stdout.setEncoding('utf8');
    this.child.stdout.on('data', (chunk: string) => this.read(chunk));
    this.child.stderr.setEncoding('utf8');
    let partial = '';
    this.child.stderr.on('data', (chunk: string) => {
      const lines = (partial + chunk).split('\n');
      partial = lines.pop()!.slice(-4096);
      for (const line of lines) {
        if (!line.trim()) continue;
        this.stderr.push(line.slice(0, 1000));
        if (this.stderr.length > STDERR_LINES) this.stderr.shift();
        log(line.slice(0, 1000));
      }
    });
    this.child.stdin.on('error', () => undefined);
    this.ended = new Promise((resolve) => {
      const end = (why: string) => {
        this.fail(new EngineGone(why));
        resolve(why);
      };
      this.child.once('error', (error) => end(`the engine could not start (${(error as NodeJS.ErrnoException).code ?? error.message})`));
      this.child.once('exit', (code, signal) => {
        const last = this.stderr.filter((line) => /error|panic/i.test(line)).at(-1) ?? this.stderr.at(-1);
        end(`the engine ended (${signal ?? `exit code ${code}`})${last ? `: ${last.replace(/\x1b\[[0-9;]*m/g, '').trim().slice(0, 300)}` : ''}`);
      });
    });
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /** Calls one of the engine's methods (snake_case, positional parameters); rejects with an EngineError, an EngineGone, or on timeout. */
  call<T>(method: string, params: unknown[] = [], timeoutMs: number | undefined = CALL_TIMEOUT_MS): Promise<T> {
    if (this.gone) return Promise.reject(this.gone);
    const id = ++this.serial;
    return new Promise<T>((resolve, reject) => {
      const pending: Pending = { resolve: resolve as (value: unknown) => void, reject };
      if (timeoutMs) {
        pending.timer = setTimeout(() => {
          this.pending.delete(id);
          reject(new Error(`Delta Chat's engine did not answer ${method} within ${Math.round(timeoutMs / 1000)} s`));
        }, timeoutMs);
        pending.timer.unref();
      }
      this.pending.set(id, pending);
      this.child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', method, params, id })}\n`);
    });
  }

  private read(chunk: string): void {
    this.buffer += chunk;
    let end: number;
    while ((end = this.buffer.indexOf('\n')) >= 0) {
      const line = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + 1);
      if (line.trim()) this.answer(line);
    }
    if (this.buffer.length > MAX_LINE_BYTES) {
      this.buffer = '';
      this.fail(new EngineGone(`the engine wrote a line of more than ${MAX_LINE_BYTES} bytes`));
      this.child.kill('SIGKILL');
    }
  }

  private answer(line: string): void {
    let message: { id?: unknown; result?: unknown; error?: { code?: unknown; message?: unknown } };
    try {
      message = JSON.parse(line) as typeof message;
    } catch {
      return;
    }
    if (typeof message?.id !== 'number') return;
    const pending = this.pending.get(message.id);
    if (!pending) return;
    this.pending.delete(message.id);
    clearTimeout(pending.timer);
    if (message.error) {
      pending.reject(new EngineError(typeof message.error.code === 'number' ? message.error.code : 0, typeof message.error.message === 'string' ? message.error.message.slice(0, 1000) : 'the engine refused the call'));
    } else pending.resolve(message.result ?? null);
  }

  private fail(error: EngineGone): void {
    this.gone ??= error;
    for (const [id, pending] of this.pending) {
      this.pending.delete(id);
      clearTimeout(pending.timer);
      pending.reject(this.gone);
    }
  }

  /** Closes the engine's stdin (it stops its connections and ends), killing it past the grace. */
  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    this.child.stdin.end();
    const kill = setTimeout(() => this.child.kill('SIGKILL'), STOP_GRACE_MS);
    await this.ended;
    clearTimeout(kill);
  }
}
