import { type ChildProcess, spawn } from 'node:child_process';
import { openSync, closeSync } from 'node:fs';
import { connect } from 'node:net';
import { GatewayError } from '../shared/errors.ts';
import { ExitCode } from '../shared/exit-codes.ts';
import { setTimeout as delay } from 'node:timers/promises';
import { inspectDaemon, processState, removeStaleLock } from '../shared/daemon-lock.ts';
import { isDaemonMessage, type DaemonMessage } from '../shared/daemon-messages.ts';
import { connectHost, httpUrl } from '../shared/listen.ts';
import type { ProfilePaths } from '../shared/profile.ts';
import { gatewayBin } from '../shared/version.ts';
import { DAEMON_NODE_FLAGS } from '../shared/run-args.ts';
import { lastLines, renderLogLine } from './log-tail.ts';
import { connectToDaemon, runningDaemon, type RpcClient } from './rpc-client.ts';

export interface StartOptions {
  port?: number;
  bind?: string;
  verbose?: boolean;
  timeoutMs: number;
}

export interface StartOutcome {
  profile: string;
  state: 'started' | 'already-running';
  pid: number;
  port: number;
  url: string;
  logFile: string;
  startMs?: number;
  /** The systemd unit that runs the daemon, when a service manages the profile. */
  service?: string;
}

/** The last lines of the log, for a failure message. */
export function logExcerpt(paths: ProfilePaths, count = 15): string {
  const lines = lastLines(paths.log, count);
  return lines.length ? `\nLast lines of ${paths.log}:\n${lines.map((line) => `  ${renderLogLine(line)}`).join('\n')}` : '';
}

/**
 * Spawns `gateway run` detached (own session, output to the log file, no pipe
 * kept open) and waits for its ready message, its exit, or the deadline.
 */
export async function startDaemon(paths: ProfilePaths, options: StartOptions): Promise<StartOutcome> {
  const existing = inspectDaemon(paths);
  if (existing.state === 'running' || existing.state === 'starting') {
    const record = runningDaemon(paths, options.timeoutMs);
    return { profile: paths.name, state: 'already-running', pid: record.pid, port: record.port, url: httpUrl(record.host, record.port), logFile: paths.log };
  }

  const started = performance.now();
  const args = [...DAEMON_NODE_FLAGS, gatewayBin(), 'run', '--profile', paths.name, '--detached'];
  if (options.port !== undefined) args.push('--port', String(options.port));
  if (options.bind) args.push('--bind', options.bind);
  if (options.verbose) args.push('--verbose');
  const log = openSync(paths.log, 'a', 0o600);
  let child: ChildProcess;
  try {
    // Its own session, output straight to the log file (no pipe through this process), and an IPC channel for its ready message.
    child = spawn(process.execPath, args, { detached: true, stdio: ['ignore', log, log, 'ipc'], serialization: 'json' });
  } finally {
    closeSync(log);
  }
  const exited = new Promise<{ kind: 'exit'; code: number; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => resolve({ kind: 'exit', code: code ?? 1, signal }));
    child.once('error', () => resolve({ kind: 'exit', code: 1, signal: null }));
  });

  let timer: NodeJS.Timeout | undefined;
  const outcome = await Promise.race([
    new Promise<{ kind: 'message'; message: DaemonMessage }>((resolve) => {
      const listener = (message: unknown) => {
        if (!isDaemonMessage(message)) return;
        child.off('message', listener);
        resolve({ kind: 'message', message });
      };
      child.on('message', listener);
    }),
    exited,
    new Promise<{ kind: 'timeout' }>((resolve) => { timer = setTimeout(() => resolve({ kind: 'timeout' }), options.timeoutMs); }),
  ]);
  clearTimeout(timer);

  if (outcome.kind === 'message' && outcome.message.type === 'ready') {
    // Let this process exit while the daemon lives on.
    if (child.connected) child.disconnect();
    child.unref();
    return {
      profile: paths.name, state: 'started', pid: outcome.message.pid, port: outcome.message.port, url: outcome.message.url,
      logFile: paths.log, startMs: Math.round(performance.now() - started),
    };
  }
  if (outcome.kind === 'message' && outcome.message.type === 'running') {
    await exited;
    const record = runningDaemon(paths, options.timeoutMs);
    return { profile: paths.name, state: 'already-running', pid: record.pid, port: record.port, url: httpUrl(record.host, record.port), logFile: paths.log };
  }
  if (outcome.kind === 'message' && outcome.message.type === 'error') {
    await exited;
    throw new GatewayError(outcome.message.message, { exitCode: outcome.message.exitCode as ExitCode, hints: outcome.message.hints });
  }
  if (outcome.kind === 'timeout') {
    child.kill('SIGTERM');
    await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 3000))]);
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    throw new GatewayError(`The daemon of profile "${paths.name}" was not ready within ${options.timeoutMs} ms and was stopped.${logExcerpt(paths)}`, {
      hints: [`gateway logs --profile ${paths.name}`, 'gateway start --timeout <ms>   # allow more time'],
    });
  }
  const code = outcome.kind === 'exit' ? outcome.code : 1;
  const how = outcome.kind === 'exit' && outcome.signal ? `was killed by ${outcome.signal}` : `exited with code ${code}`;
  throw new GatewayError(`The daemon of profile "${paths.name}" ${how} during start-up.${logExcerpt(paths)}`, {
    exitCode: (code === 0 ? ExitCode.failure : code) as ExitCode,
    hints: [`gateway logs --profile ${paths.name}`],
  });
}

export interface StopOutcome {
  profile: string;
  state: 'stopped' | 'not-running';
  pid?: number;
  /** How it was stopped: rpc, SIGTERM or SIGKILL, through its service manager; a stale lock is "cleared". */
  method?: 'rpc' | 'SIGTERM' | 'SIGKILL' | 'cleared' | 'service';
}

function portFree(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: connectHost(host), port });
    socket.once('connect', () => { socket.destroy(); resolve(false); });
    socket.once('error', () => resolve(true));
  });
}

async function waitForExit(pid: number, host: string, port: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (processState(pid) !== 'alive' && (await portFree(host, port))) return true;
    await delay(25);
  }
  return false;
}

/** Asks the daemon to shut down over RPC, falls back to SIGTERM, and SIGKILL only when forced. */
export async function stopDaemon(paths: ProfilePaths, options: { force: boolean; timeoutMs: number }): Promise<StopOutcome> {
  const found = inspectDaemon(paths);
  if (found.state === 'stopped') return { profile: paths.name, state: 'not-running' };
  if (found.state === 'stale') {
    removeStaleLock(paths);
    return { profile: paths.name, state: 'not-running', pid: found.record?.pid, method: 'cleared' };
  }
  const { pid, host, port } = found.record;
  let method: StopOutcome['method'] = 'rpc';
  try {
    const client = await connectToDaemon(paths, { timeoutMs: 3000 });
    try {
      await client.call('shutdown', undefined, 3000);
    } finally {
      client.close();
    }
  } catch {
    method = 'SIGTERM';
    try {
      process.kill(pid, 'SIGTERM');
    } catch {
      // already gone
    }
  }
  if (await waitForExit(pid, host, port, options.timeoutMs)) {
    removeStaleLock(paths);
    return { profile: paths.name, state: 'stopped', pid, method };
  }
  if (!options.force) {
    throw new GatewayError(`The daemon of profile "${paths.name}" (pid ${pid}) did not stop within ${options.timeoutMs} ms.`, {
      hints: [`gateway stop --profile ${paths.name} --force   # kills it with SIGKILL`],
    });
  }
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // already gone
  }
  if (!(await waitForExit(pid, host, port, 5000))) {
    throw new GatewayError(`The daemon of profile "${paths.name}" (pid ${pid}) survived SIGKILL.`);
  }
  removeStaleLock(paths);
  return { profile: paths.name, state: 'stopped', pid, method: 'SIGKILL' };
}

/** Shuts down a gateway at a URL over RPC and waits until its port refuses connections. */
export async function stopRemote(client: RpcClient, url: string, timeoutMs: number): Promise<StopOutcome> {
  const { profile } = await client.call('status');
  const { pid } = await client.call('shutdown');
  client.close();
  const { hostname, port } = new URL(url);
  const host = hostname.replace(/^\[|\]$/g, '');
  const deadline = Date.now() + timeoutMs;
  while (!(await portFree(host, Number(port) || 80))) {
    if (Date.now() > deadline) throw new GatewayError(`The gateway at ${url} did not stop within ${timeoutMs} ms.`);
    await delay(50);
  }
  return { profile, state: 'stopped', pid, method: 'rpc' };
}
