import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { unmountImages } from '../../src/shared/workspace-image.ts';
import { startedPostgres, testEngine } from './postgres.ts';

export const ROOT = new URL('../../', import.meta.url).pathname;
export const BIN = join(ROOT, 'bin/run.js');
export const PLUGIN_FIXTURES = join(ROOT, 'test/fixtures/plugins');

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
  /** stdout parsed as JSON, when it is. */
  json: any;
}

export interface CliOptions {
  env?: Record<string, string | undefined>;
  input?: string;
  /** stdin: 'pipe' feeds input (or closes it), 'ignore' gives /dev/null. */
  stdin?: 'pipe' | 'ignore';
  timeoutMs?: number;
  /** A command that runs the CLI, such as ["ip", "netns", "exec", name]. */
  prefix?: string[];
}

/** A temporary GATEWAY_HOME with helpers to run the built CLI in it as a user would. */
export class Home {
  readonly dir: string;
  readonly env: Record<string, string | undefined>;

  /** A fresh temporary folder, or the one given (a file system a test mounted). */
  constructor(env: Record<string, string | undefined> = {}, dir = mkdtempSync(join(tmpdir(), 'gateway-test-'))) {
    this.dir = dir;
    // Under GATEWAY_TEST_STORE=postgres each home's daemons keep their state in a fresh database of the tests' server.
    const postgres = testEngine() === 'postgres' ? startedPostgres() : undefined;
    this.env = { GATEWAY_HOME: this.dir, ...(postgres ? { GATEWAY_STORE_URL: postgres.createDatabase() } : {}), ...env };
  }

  profileDir(name = 'default'): string {
    return join(this.dir, 'profiles', name);
  }

  file(name: string, profile = 'default'): string {
    return join(this.profileDir(profile), name);
  }

  run(args: string[], options: CliOptions = {}): Promise<CliResult> {
    return runCli(args, { ...options, env: { ...this.env, ...options.env } });
  }

  /** Runs a command with --json that must succeed (exit 0), and returns what it printed, parsed. */
  async json(args: string[]): Promise<any> {
    const result = await this.run([...args, '--json']);
    if (result.code !== 0) throw new Error(`gateway ${args.join(' ')} exited ${result.code}: ${result.stderr}`);
    return result.json;
  }

  /** Sets a config key to a value (written as JSON); the command must succeed. */
  async set(key: string, value: unknown): Promise<void> {
    const result = await this.run(['config', 'set', key, JSON.stringify(value)]);
    if (result.code !== 0) throw new Error(`gateway config set ${key} exited ${result.code}: ${result.stderr}`);
  }

  /** The profile's secrets as its file store holds them (profiles on the file backend). */
  secrets(profile = 'default'): Record<string, string> {
    return JSON.parse(readFileSync(this.file('secrets.json', profile), 'utf8')).secrets;
  }

  /** The gateway token the daemon generated on first start. */
  token(profile = 'default'): string {
    return this.secrets(profile)['gateway.token']!;
  }

  /** Everything the default profile's store holds, as text: its SQLite files, or a dump of its PostgreSQL database. */
  stateText(): string {
    const url = this.env.GATEWAY_STORE_URL;
    if (url) return startedPostgres()!.dump(new URL(url).pathname.slice(1));
    const read = (name: string) => (existsSync(this.file(name)) ? readFileSync(this.file(name)).toString('latin1') : '');
    return read('state.db') + read('state.db-wal');
  }

  lock(profile = 'default'): any {
    return JSON.parse(readFileSync(this.file('daemon.json', profile), 'utf8'));
  }

  /** Kills every daemon this home started, unmounts the workspaces' file systems they mounted, and removes the folder. */
  cleanup(): void {
    let names: string[] = [];
    try {
      names = readdirSync(join(this.dir, 'profiles'));
    } catch {
      // nothing was created
    }
    for (const name of names) {
      try {
        const { pid } = JSON.parse(readFileSync(this.file('daemon.json', name), 'utf8'));
        if (pid !== process.pid) process.kill(pid, 'SIGKILL');
      } catch {
        // not running
      }
    }
    unmountImages(this.dir);
    rmSync(this.dir, { recursive: true, force: true });
  }
}

export function runCli(args: string[], options: CliOptions = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const [command, ...before] = [...(options.prefix ?? []), process.execPath, BIN, ...args];
    const child = spawn(command!, before, {
      env: childEnv(options.env),
      stdio: [options.stdin ?? 'pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    // Decoded as one stream: a character whose bytes two chunks split (a long list's "…") stays one character.
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => { stdout += chunk; });
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => { stderr += chunk; });
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`gateway ${args.join(' ')} did not finish in ${options.timeoutMs ?? 30_000} ms\nstdout: ${stdout}\nstderr: ${stderr}`));
    }, options.timeoutMs ?? 30_000);
    if (child.stdin) child.stdin.end(options.input ?? '');
    child.on('close', (code) => {
      clearTimeout(timer);
      let json: unknown;
      try {
        json = JSON.parse(stdout);
      } catch {
        json = undefined;
      }
      resolve({ code, stdout, stderr, json });
    });
  });
}

/** A port nothing listens on right now. */
/**
 * A port for a test's server, free now. Taken below the kernel's ephemeral range (32768 and up), where no
 * connection's own port and no server listening on port 0 can take it before the test does; and, within a run
 * (test/support/setup.ts), never handed out twice, whichever of its processes asks.
 */
export async function freePort(): Promise<number> {
  const handedOut = process.env.GATEWAY_TEST_PORTS;
  for (let tries = 0; tries < 1000; tries++) {
    const port = 10_000 + Math.floor(Math.random() * 22_000);
    if (handedOut) {
      try {
        closeSync(openSync(join(handedOut, String(port)), 'wx'));
      } catch {
        continue;
      }
    }
    if (await bindable(port)) return port;
  }
  throw new Error('no free port below 32768');
}

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** The environment of a CLI run: never a terminal session (CI set), with undefined values removed. */
function childEnv(env: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  // A test runner started by systemd would make every foreground daemon log to stdout only.
  const full: Record<string, string | undefined> = { ...process.env, CI: 'true', NO_COLOR: '1', INVOCATION_ID: undefined, JOURNAL_STREAM: undefined, ...env };
  for (const key of Object.keys(full)) if (full[key] === undefined) delete full[key];
  return full as NodeJS.ProcessEnv;
}

export function spawnForeground(args: string[], env: Record<string, string | undefined>): ChildProcess {
  return spawn(process.execPath, [BIN, ...args], { env: childEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function waitFor<T>(probe: () => T | undefined | Promise<T | undefined>, timeoutMs = 10_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value as T;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}
