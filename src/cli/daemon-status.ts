import { loadConfig, readEffectiveConfig } from '../shared/config/profile-config.ts';
import type { GatewayConfig } from '../shared/config/types.ts';
import { inspectDaemon, modifiedAt } from '../shared/daemon-lock.ts';
import { httpUrl } from '../shared/listen.ts';
import { derivedPort, type ProfilePaths } from '../shared/profile.ts';
import { readIdentity } from '../shared/profile-identity.ts';
import type { RpcClient } from './rpc-client.ts';

export interface StatusResult {
  profile: string;
  state: 'running' | 'stopped' | 'stale';
  /** false while a running daemon is still starting. */
  ready?: boolean;
  pid: number | null;
  port: number;
  bind: string;
  url: string;
  version: string | null;
  uptimeMs: number | null;
  logFile: string;
  secretStore: string | null;
  /** Why a daemon is stale. */
  reason?: string;
  rpc: { ok: boolean; error?: string };
  /** Plugins that failed to load, when the daemon answered. */
  plugins?: { loaded: string[]; errors: { plugin: string; error: string }[] };
  /** Why config.json cannot be used (the daemon, if it runs, is reported from its lock all the same). */
  configError?: string;
  /** What keeps a running daemon from serving (its readiness checks that fail), by name. */
  problems?: Record<string, string>;
  /** The daemon's memory in bytes, when it answered. */
  memory?: { rss: number; heapUsed: number; heapTotal: number; external: number };
  /** Where the private overlay publishes the gateway (gateway.overlay.mode serve or funnel). */
  overlay?: { mode: 'serve' | 'funnel'; url: string };
  /** The systemd unit that manages the daemon, and what systemd says of it. */
  service?: { unit: string; scope: 'user' | 'system'; active: string };
}

/** The state of a profile's daemon from its lock and, when it runs, one RPC round trip. */
/** The secret store the profile was made with (profile.json), if it can be read. */
function identityBackend(paths: ProfilePaths): string | undefined {
  try {
    return readIdentity(paths)?.secrets;
  } catch {
    return undefined;
  }
}

export async function daemonStatus(paths: ProfilePaths, options: { rpc: boolean } = { rpc: true }): Promise<StatusResult> {
  // A broken config.json is reported beside the daemon's state, which comes from its lock whatever the file says.
  let config: GatewayConfig | undefined;
  let configError: string | undefined;
  const found = inspectDaemon(paths);
  const modified = modifiedAt(paths.config);
  if (modified !== undefined) {
    try {
      // A file unchanged since a running daemon started was checked by that start: it is read, not checked again.
      const checked = (found.state === 'running' || found.state === 'starting') && modified < found.record.startedAt;
      config = checked ? readEffectiveConfig(paths) : loadConfig(paths).effective;
    } catch (error) {
      configError = (error as Error).message;
    }
  }
  const port = Number(process.env.GATEWAY_PORT) || config?.gateway.port || derivedPort(paths.name);
  const base = {
    profile: paths.name,
    logFile: paths.log,
    // Where the profile keeps its secrets, as it was made (a running daemon says the same).
    secretStore: identityBackend(paths) ?? config?.secrets.backend ?? null,
    ...(configError ? { configError } : {}),
  };
  if (found.state === 'stopped') {
    const bind = config?.gateway.bind ?? 'loopback';
    return {
      ...base, state: 'stopped', pid: null, port, bind, url: httpUrl('127.0.0.1', port), version: null, uptimeMs: null,
      rpc: { ok: false, error: 'not running' },
    };
  }
  if (found.state === 'stale') {
    const record = found.record;
    return {
      ...base, state: 'stale', pid: record?.pid ?? null, port: record?.port ?? port, bind: record?.bind ?? 'loopback',
      url: httpUrl(record?.host ?? '127.0.0.1', record?.port ?? port), version: record?.version ?? null, uptimeMs: null,
      reason: found.reason, rpc: { ok: false, error: 'stale' },
    };
  }
  const record = found.record;
  const result: StatusResult = {
    ...base,
    state: 'running',
    ready: found.state === 'running',
    pid: record.pid,
    port: record.port,
    bind: record.bind,
    url: httpUrl(record.host, record.port),
    version: record.version,
    uptimeMs: Date.now() - record.startedAt,
    rpc: { ok: false },
  };
  if (!options.rpc) return { ...result, rpc: { ok: false, error: 'not checked' } };
  if (found.state === 'starting') return { ...result, rpc: { ok: false, error: 'daemon is still starting' } };
  try {
    const { connectToDaemon } = await import('./rpc-client.ts');
    const client = await connectToDaemon(paths, { timeoutMs: 5000 });
    try {
      const live = await client.call('status', undefined, 5000);
      const overlay = config && config.gateway.overlay.mode !== 'off' ? (await client.call('overlay.status', undefined, 5000)).overlay : null;
      return {
        ...(overlay ? { overlay } : {}),
        ...result, uptimeMs: live.uptimeMs, version: live.version, secretStore: live.secretStore, logFile: live.logFile, rpc: { ok: true },
        ...(live.plugins ? { plugins: { loaded: live.plugins.loaded, errors: live.plugins.errors } } : {}),
        ...(live.problems ? { problems: live.problems } : {}),
        ...(live.memory ? { memory: live.memory } : {}),
      };
    } finally {
      client.close();
    }
  } catch (error) {
    return { ...result, rpc: { ok: false, error: (error as Error).message } };
  }
}

export function formatDuration(ms: number): string {
  const seconds = Math.floor(ms / 1000);
  const parts = [[Math.floor(seconds / 86400), 'd'], [Math.floor(seconds / 3600) % 24, 'h'], [Math.floor(seconds / 60) % 60, 'm'], [seconds % 60, 's']] as const;
  const shown = parts.filter(([value]) => value > 0).slice(0, 2).map(([value, unit]) => `${value}${unit}`);
  return shown.length ? shown.join(' ') : `${ms} ms`;
}

/** Status of a gateway at a URL: what its status method says, or stopped when nothing answers there. */
export async function remoteStatus(url: string, connect: () => Promise<RpcClient>): Promise<StatusResult> {
  const { GatewayError } = await import('../shared/errors.ts');
  const { RpcCallError } = await import('./rpc-client.ts');
  try {
    const client = await connect();
    const live = await client.call('status');
    return {
      profile: live.profile, state: 'running', ready: true, pid: live.pid, port: live.port, bind: live.bind, url,
      version: live.version, uptimeMs: live.uptimeMs, logFile: live.logFile, secretStore: live.secretStore, rpc: { ok: true },
      ...(live.plugins ? { plugins: { loaded: live.plugins.loaded, errors: live.plugins.errors } } : {}),
    };
  } catch (error) {
    // A gateway that answers but refuses this CLI (no credential, a device not yet approved) is an error to act on, not a status.
    if (error instanceof RpcCallError) {
      throw new GatewayError(`The gateway at ${url} answered but refused this CLI: ${error.message}`, {
        exitCode: error.exitCode, code: error.code,
        hints: error.hints.length > 0 ? error.hints : ['pass its credential: GATEWAY_TOKEN=... gateway status --url <url>'],
      });
    }
    if (error instanceof GatewayError && error.exitCode !== 1) throw error;
    return {
      profile: '', state: 'stopped', pid: null, port: Number(new URL(url).port) || 0, bind: 'unknown', url, version: null, uptimeMs: null,
      logFile: '', secretStore: null, rpc: { ok: false, error: (error as Error).message },
    };
  }
}
