/**
 * A real PostgreSQL server from the host's packages, started for the tests in
 * a temporary folder on a loopback port and a unix socket, as the `postgres`
 * user when the tests run as root (the server refuses root). One server per
 * test process, started on first use and stopped when the process exits; each
 * test takes a fresh database of its own.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const asRoot = process.getuid?.() === 0;

/** The server's programs (Debian's postgresql package), newest version first. */
export function postgresBin(): string | undefined {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root).filter((name) => existsSync(join(root, name, 'bin', 'postgres'))).sort((a, b) => Number(b) - Number(a));
  return versions[0] ? join(root, versions[0], 'bin') : undefined;
}

/** Runs one of the server's programs as the user that owns its data. */
function run(bin: string, program: string, args: string[], options: { input?: string } = {}): string {
  const [command, ...rest] = asRoot ? ['runuser', '-u', 'postgres', '--', join(bin, program), ...args] : [join(bin, program), ...args];
  return execFileSync(command!, rest, { encoding: 'utf8', input: options.input, stdio: ['pipe', 'pipe', 'pipe'] });
}

let counter = 0;

export class TestPostgres {
  readonly dir: string;
  readonly port: number;
  private readonly bin: string;
  private child?: ChildProcess;
  /** The superuser the tests connect as (trusted on loopback). */
  readonly user = 'gateway_test';

  private constructor(bin: string, dir: string, port: number) {
    this.bin = bin;
    this.dir = dir;
    this.port = port;
  }

  /** Whether commits reach the disk (fsync); tests turn it off for speed, the benchmark keeps it. */
  private fsync = false;

  /** Makes a cluster and starts its server; resolves once it answers. */
  static async start(port: number, options: { fsync?: boolean } = {}): Promise<TestPostgres> {
    const bin = postgresBin();
    if (!bin) throw new Error('PostgreSQL is not installed: apt-get install postgresql (bash .ci/run does)');
    const dir = mkdtempSync(join(tmpdir(), 'gateway-pg-'));
    if (asRoot) chownSync(dir, Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim()), Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim()));
    const server = new TestPostgres(bin, dir, port);
    server.fsync = options.fsync ?? false;
    run(bin, 'initdb', ['-D', server.data, '-U', server.user, '--auth=trust', '--no-sync', '-E', 'UTF8', '--locale=C']);
    // A role that must give a password over TCP, for the tests of store.password; every other connection is trusted.
    writeFileSync(join(server.data, 'pg_hba.conf'), [
      'local all all trust',
      'host all gateway_pw 127.0.0.1/32 scram-sha-256',
      'host all all 127.0.0.1/32 trust',
      '',
    ].join('\n'));
    if (asRoot) execFileSync('chown', ['postgres:postgres', join(server.data, 'pg_hba.conf')]);
    await server.launch();
    return server;
  }

  get data(): string {
    return join(this.dir, 'data');
  }

  private async launch(): Promise<void> {
    const args = ['-D', this.data, '-p', String(this.port), '-k', this.dir, '-c', 'listen_addresses=127.0.0.1', '-c', `fsync=${this.fsync ? 'on' : 'off'}`,
      '-c', 'max_connections=200', '-c', 'shared_buffers=64MB'];
    const [command, ...rest] = asRoot ? ['runuser', '-u', 'postgres', '--', join(this.bin, 'postgres'), ...args] : [join(this.bin, 'postgres'), ...args];
    const child = spawn(command!, rest, { stdio: ['ignore', 'ignore', 'pipe'] });
    let log = '';
    child.stderr!.on('data', (chunk) => { log = (log + chunk).slice(-4000); });
    this.child = child;
    const deadline = Date.now() + 30_000;
    for (;;) {
      try {
        this.sql('SELECT 1');
        return;
      } catch {
        if (child.exitCode !== null || Date.now() > deadline) throw new Error(`PostgreSQL did not start:\n${log}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  }

  /** Runs SQL as the superuser with psql; returns its unaligned output. */
  sql(sql: string, database = 'postgres'): string {
    return run(this.bin, 'psql', ['-h', this.dir, '-p', String(this.port), '-U', this.user, '-d', database, '-XAtq', '-v', 'ON_ERROR_STOP=1', '-c', sql]).trim();
  }

  /** A new empty database; returns its URL (loopback TCP, trusted). */
  createDatabase(name = `gw_${process.pid}_${++counter}`): string {
    this.sql(`CREATE DATABASE ${name}`);
    return this.url(name);
  }

  /** Every row of a database, as pg_dump writes them. */
  dump(database: string): string {
    return run(this.bin, 'pg_dump', ['-h', this.dir, '-p', String(this.port), '-U', this.user, '-d', database, '--data-only']);
  }

  url(database: string, user = this.user): string {
    return `postgres://${user}@127.0.0.1:${this.port}/${database}`;
  }

  /** Stops the server (fast: open sessions are ended), keeping its data. */
  stop(): void {
    if (!this.child || this.child.exitCode !== null) return;
    run(this.bin, 'pg_ctl', ['-D', this.data, '-m', 'fast', '-w', 'stop']);
    this.child = undefined;
  }

  /** Starts it again on the same port with the same data. */
  async restart(): Promise<void> {
    await this.launch();
  }

  /** Stops it and removes its data. */
  destroy(): void {
    try {
      if (this.child && this.child.exitCode === null) run(this.bin, 'pg_ctl', ['-D', this.data, '-m', 'immediate', '-w', 'stop']);
    } catch {
      this.child?.kill('SIGKILL');
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

let shared: TestPostgres | undefined;
let starting: Promise<TestPostgres> | undefined;

/** The test process's server, started on first use and stopped at exit. */
export function sharedPostgres(port: () => Promise<number>): Promise<TestPostgres> {
  if (shared) return Promise.resolve(shared);
  starting ??= (async () => {
    const server = await TestPostgres.start(await port());
    shared = server;
    process.once('exit', () => server.destroy());
    return server;
  })();
  return starting;
}

/** The server the root hook started (GATEWAY_TEST_STORE=postgres), for code that cannot wait. */
export function startedPostgres(): TestPostgres | undefined {
  return shared;
}

/** Which engine the end-to-end suites run against: GATEWAY_TEST_STORE=postgres runs them on PostgreSQL. */
export const testEngine = (): 'sqlite' | 'postgres' => (process.env.GATEWAY_TEST_STORE === 'postgres' ? 'postgres' : 'sqlite');

