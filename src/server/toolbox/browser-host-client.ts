/**
 * The browsers' process (browser-host.ts), seen from the daemon: started at
 * the first browser.* call, each call sent over its IPC channel and its
 * answer or its error (a DomainError, rebuilt here) awaited; ended once no
 * browser has been open for a while, so Playwright and what it holds leave
 * the daemon's memory with it. It gets an environment of its own (no secret
 * of the daemon's) and ends with the daemon.
 */
import { type ChildProcess, fork } from 'node:child_process';
import type { Logger } from 'pino';
import type { ErrorKind } from '../../shared/error-kinds.ts';
import { DomainError } from '../kernel/errors.ts';
import type { BrowserSettings } from './browsers.ts';

/** What a browser.* call asks of the person's browser. */
export type BrowserAction =
  | { op: 'open'; url: string; newPage: boolean }
  | { op: 'snapshot'; page?: string }
  | { op: 'click'; ref: string; page?: string }
  | { op: 'type'; ref: string; text: string; submit: boolean; page?: string }
  | { op: 'screenshot'; page?: string; fullPage: boolean; maxBytes: number }
  | { op: 'closePage'; page: string }
  | { op: 'close' };

export interface HostCall {
  type: 'call';
  id: number;
  agent?: string;
  person: string;
  action: BrowserAction;
  settings: BrowserSettings;
  /** The workspace of the call's agent, where downloads and screenshots go. */
  workspace: { root: string; owner?: { uid: number; gid: number } };
}

export type ToHost = HostCall | { type: 'settings'; settings: BrowserSettings } | { type: 'stop' };

export interface HostError {
  kind: ErrorKind;
  message: string;
  code?: string;
  details?: Record<string, unknown>;
  headers: Record<string, string>;
  retryable?: boolean;
}

export type FromHost =
  | { type: 'ready' }
  | { type: 'answer'; id: number; result: unknown; browsers: number }
  | { type: 'failed'; id: number; error: HostError; browsers: number }
  | { type: 'browsers'; count: number }
  | { type: 'log'; level: 'info' | 'warn' | 'error'; fields: Record<string, unknown>; message: string };

/** How long the process stays once no browser is open: the next browser then starts without loading Playwright again. */
export const HOST_LINGER_MS = 30_000;
/** The browsers' process's heap, at most (MB). */
const HOST_HEAP_MB = 512;
/** Largest screenshot kept. */
export const SCREENSHOT_BYTES = 32 * 1024 * 1024;
/** How long a stopping daemon waits for the process to close its browsers. */
const STOP_MS = 10_000;

export interface BrowserHostDeps {
  profileDir: string;
  logger: Logger;
  lingerMs?: number;
}

export class BrowserHost {
  private readonly deps: BrowserHostDeps;
  private child: ChildProcess | undefined;
  private readonly waiting = new Map<number, { resolve: (value: unknown) => void; reject: (error: unknown) => void }>();
  private nextId = 1;
  private browsers = 0;
  private lastActive = Date.now();
  private watch: NodeJS.Timeout | undefined;

  constructor(deps: BrowserHostDeps) {
    this.deps = deps;
  }

  /** Whether the process runs now (tests and the benchmark look). */
  get running(): boolean {
    return this.child !== undefined;
  }

  /** Sends one call to the browsers' process, started if need be; resolves with its answer. */
  call(call: Omit<HostCall, 'type' | 'id'>): Promise<unknown> {
    const child = this.child ?? this.start();
    const id = this.nextId++;
    this.lastActive = Date.now();
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      child.send({ type: 'call', id, ...call } satisfies HostCall, (error) => {
        if (error) this.settle(id)?.reject(gone());
      });
    });
  }

  private settle(id: number) {
    const waiter = this.waiting.get(id);
    this.waiting.delete(id);
    this.lastActive = Date.now();
    return waiter;
  }

  private start(): ChildProcess {
    // Beside this file: .js when built (the daemon's bundle has it as an entry of its own), .ts when run from the sources.
    const entry = new URL(`./browser-host.${import.meta.url.endsWith('.ts') ? 'ts' : 'js'}`, import.meta.url);
    const env: NodeJS.ProcessEnv = { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: 'C.UTF-8', ...(process.env.TMPDIR ? { TMPDIR: process.env.TMPDIR } : {}) };
    // Its heap bounded: what Chromium sends it (a browser taken over by a page among them) cannot grow it past that.
    const child = fork(entry, [this.deps.profileDir], { serialization: 'advanced', stdio: ['ignore', 'ignore', 'inherit', 'ipc'], execArgv: [`--max-old-space-size=${HOST_HEAP_MB}`], env });
    this.child = child;
    this.browsers = 0;
    child.on('message', (message: FromHost) => {
      switch (message.type) {
        case 'answer':
          this.browsers = message.browsers;
          this.settle(message.id)?.resolve(message.result);
          break;
        case 'failed': {
          this.browsers = message.browsers;
          const { kind, message: text, ...options } = message.error;
          this.settle(message.id)?.reject(new DomainError(kind, text, options));
          break;
        }
        case 'browsers':
          this.browsers = message.count;
          break;
        case 'log':
          this.deps.logger[message.level](message.fields, message.message);
          break;
      }
    });
    child.on('exit', (code, signal) => {
      if (this.child !== child) return;
      this.child = undefined;
      clearInterval(this.watch);
      this.watch = undefined;
      if (code !== 0) this.deps.logger.warn({ code, signal }, 'the browsers\' process ended');
      for (const id of [...this.waiting.keys()]) this.settle(id)?.reject(gone());
    });
    child.on('error', (error) => this.deps.logger.error({ err: error }, 'the browsers\' process failed'));
    // No browser and no call for a while: the process is ended (calls sent later start another).
    this.watch = setInterval(() => {
      if (this.waiting.size > 0 || this.browsers > 0) return;
      if (Date.now() - this.lastActive >= (this.deps.lingerMs ?? HOST_LINGER_MS)) void this.stop();
    }, 1000);
    this.watch.unref();
    return child;
  }

  /** Tells the running browsers of changed settings (their bounds, the private addresses allowed) at once. */
  settings(settings: BrowserSettings): void {
    this.child?.send({ type: 'settings', settings } satisfies ToHost, () => undefined);
  }

  /** Ends the process, its browsers closed first (killed past a bound). */
  async stop(): Promise<void> {
    const child = this.child;
    if (!child) return;
    this.child = undefined;
    clearInterval(this.watch);
    this.watch = undefined;
    const exited = new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      child.once('exit', () => resolve());
    });
    child.send({ type: 'stop' } satisfies ToHost, () => undefined);
    const timer = setTimeout(() => child.kill('SIGKILL'), STOP_MS);
    await exited;
    clearTimeout(timer);
    for (const id of [...this.waiting.keys()]) this.settle(id)?.reject(gone());
  }
}

const gone = () => new DomainError('unavailable', 'The browser stopped before it answered (the gateway is stopping, or the browsers\' process failed); call browser.open again.', { code: 'browser_closed', retryable: true });
