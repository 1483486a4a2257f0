/**
 * What several daemons on one PostgreSQL database agree on, over one
 * connection of each daemon's own (apart from the one its statements use):
 *
 * - singletons: work exactly one daemon does (a channel's connection), each
 *   held through a session advisory lock. The lock goes with the connection:
 *   a daemon that dies (or loses the database) lets go of it, and another
 *   takes it over at its next try, a few seconds later. The server is asked to
 *   notice a vanished peer within about ten seconds (TCP keepalives of this
 *   session), so a whole host lost is covered too.
 * - events: what a client connected to any daemon should hear (pairing
 *   requests, job changes, session messages) goes out with NOTIFY and comes
 *   in with LISTEN on every other daemon.
 */
import type { Logger } from 'pino';
import type pg from 'pg';
import { withPassword } from '../../shared/store-url.ts';

/** The advisory lock namespace of the gateway's singletons (the first of the two keys). */
export const SINGLETON_LOCK_CLASS = 71_717;
const CHANNEL = 'gateway_events';
/** How often a daemon tries to take singletons it does not hold, and checks its connection. */
const TRY_EVERY_MS = 3000;
/** NOTIFY carries at most 8000 bytes. */
const MAX_NOTIFY_BYTES = 7900;

export interface Singleton {
  /** Called when this daemon takes the singleton. */
  start(): void | Promise<void>;
  /** Called when it lets go (the connection was lost, or the daemon stops). */
  stop(): void | Promise<void>;
}

export interface CoordinatorOptions {
  url: string;
  password?: string;
  /** This daemon's instance id: it names the daemon in pg_stat_activity and marks its own events. */
  instanceId: string;
  applicationName: string;
  logger: Logger;
}

export class PostgresCoordinator {
  private client?: pg.Client;
  private readonly options: CoordinatorOptions;
  private readonly singletons = new Map<string, { handlers: Singleton; held: boolean }>();
  private readonly listeners = new Set<(event: string, payload: unknown, scope: string) => void>();
  private timer?: NodeJS.Timeout;
  private closed = false;
  private busy = false;
  private backoffMs = 500;

  private constructor(options: CoordinatorOptions) {
    this.options = options;
  }

  static async open(options: CoordinatorOptions): Promise<PostgresCoordinator> {
    const coordinator = new PostgresCoordinator(options);
    await coordinator.connect();
    coordinator.schedule(TRY_EVERY_MS);
    return coordinator;
  }

  private async connect(): Promise<void> {
    const { default: pgModule } = await import('pg');
    const client = new pgModule.Client({
      connectionString: withPassword(this.options.url, this.options.password),
      application_name: this.options.applicationName,
      connectionTimeoutMillis: 5000,
      query_timeout: 5000,
      keepAlive: true,
      keepAliveInitialDelayMillis: 5000,
    });
    client.on('error', (error) => this.lost(client, error));
    client.on('end', () => this.lost(client, new Error('connection closed')));
    client.on('notification', (message) => this.received(message.payload));
    await client.connect();
    // The server drops this session (and its locks) within about ten seconds of its peer vanishing without a word.
    await client.query('SET tcp_keepalives_idle = 4; SET tcp_keepalives_interval = 2; SET tcp_keepalives_count = 3');
    await client.query(`LISTEN ${CHANNEL}`);
    this.client = client;
    this.backoffMs = 500;
  }

  /** The connection broke: every singleton held through it is let go at once. */
  private lost(which: pg.Client, error: Error): void {
    if (this.client !== which) return;
    this.client = undefined;
    void which.end().catch(() => {});
    if (this.closed) return;
    this.options.logger.warn({ error: error.message }, 'lost the coordination connection to PostgreSQL; letting go of singletons');
    this.releaseAll();
    this.schedule(this.backoffMs);
  }

  private releaseAll(): void {
    for (const [name, entry] of this.singletons) {
      if (!entry.held) continue;
      entry.held = false;
      void Promise.resolve().then(() => entry.handlers.stop()).catch((error: unknown) => {
        this.options.logger.warn({ singleton: name, err: error }, 'singleton did not stop cleanly');
      });
    }
  }

  private schedule(ms: number): void {
    if (this.closed) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.tick(), ms);
    this.timer.unref();
  }

  /** Reconnects if needed, checks the connection, and tries the singletons not held. */
  private async tick(): Promise<void> {
    if (this.busy || this.closed) return;
    this.busy = true;
    try {
      if (!this.client) {
        try {
          await this.connect();
          this.options.logger.info('coordination connection to PostgreSQL is back');
        } catch (error) {
          this.backoffMs = Math.min(this.backoffMs * 2, 5000);
          this.options.logger.debug({ error: (error as Error).message }, 'coordination connection still down');
          return;
        }
      }
      const client = this.client!;
      for (const [name, entry] of this.singletons) {
        if (entry.held) continue;
        const result = await client.query('SELECT pg_try_advisory_lock($1, hashtext($2)) AS taken', [SINGLETON_LOCK_CLASS, name]);
        if (this.client !== client || !result.rows[0]?.taken) continue;
        entry.held = true;
        this.options.logger.info({ singleton: name }, 'took singleton');
        try {
          await entry.handlers.start();
        } catch (error) {
          this.options.logger.error({ singleton: name, err: error }, 'singleton failed to start');
        }
      }
      if (this.singletons.size === 0 || [...this.singletons.values()].every((entry) => entry.held)) await client.query('SELECT 1');
    } catch (error) {
      if (this.client) this.lost(this.client, error as Error);
    } finally {
      this.busy = false;
      this.schedule(this.client ? TRY_EVERY_MS : this.backoffMs);
    }
  }

  /** Registers work exactly one daemon does; it starts here when this daemon takes it. */
  singleton(name: string, handlers: Singleton): void {
    this.singletons.set(name, { handlers, held: false });
    this.schedule(0);
  }

  /** Sends an event to the other daemons (too large ones are dropped, with a log line). */
  publish(event: string, payload: unknown, scope: string): void {
    const client = this.client;
    if (!client) return;
    const text = JSON.stringify({ from: this.options.instanceId, event, payload, scope });
    if (Buffer.byteLength(text) > MAX_NOTIFY_BYTES) {
      this.options.logger.debug({ event }, 'event too large to send to the other daemons');
      return;
    }
    client.query('SELECT pg_notify($1, $2)', [CHANNEL, text]).catch(() => {});
  }

  /** Receives events other daemons published. */
  onEvent(listener: (event: string, payload: unknown, scope: string) => void): void {
    this.listeners.add(listener);
  }

  private received(text: string | undefined): void {
    let message: { from?: string; event?: string; payload?: unknown; scope?: string };
    try {
      message = JSON.parse(text ?? '');
    } catch {
      return;
    }
    if (message.from === this.options.instanceId || typeof message.event !== 'string' || typeof message.scope !== 'string') return;
    for (const listener of this.listeners) listener(message.event, message.payload, message.scope);
  }

  /** Lets go of everything (the daemon stops): the singletons stop, the locks go with the connection. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    const stops = [...this.singletons].filter(([, entry]) => entry.held).map(async ([name, entry]) => {
      entry.held = false;
      try {
        await entry.handlers.stop();
      } catch (error) {
        this.options.logger.warn({ singleton: name, err: error }, 'singleton did not stop cleanly');
      }
    });
    await Promise.all(stops);
    await this.client?.end().catch(() => {});
    this.client = undefined;
  }
}
