import { readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { writeFileAtomic } from './atomic-file.ts';
import { GatewayError } from './errors.ts';
import type { ProfilePaths } from './profile.ts';

/** What `daemon.json` records about the daemon that holds a profile. */
export interface DaemonRecord {
  pid: number;
  /** Start time of the process as the OS reports it, to tell a reused pid from ours. */
  startTime: string;
  instanceId: string;
  profile: string;
  port: number;
  /** Bind mode and the address it resolved to. */
  bind: string;
  host: string;
  version: string;
  startedAt: number;
  readyAt?: number;
  /** --port/--bind of the run, which a restart or a reclaim reuses; values from config are read afresh. */
  overrides: { port?: number; bind?: string };
}

export type DaemonState =
  | { state: 'stopped' }
  | { state: 'starting' | 'running'; record: DaemonRecord }
  | { state: 'stale'; record?: DaemonRecord; reason: string };

type ProcessState = 'alive' | 'zombie' | 'dead';

function procStat(pid: number): string[] | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name may hold spaces and parentheses; the fields that matter follow its last ')'.
    return text.slice(text.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

function psField(pid: number, field: 'stat' | 'lstart'): string | undefined {
  try {
    // Loaded here, off Linux only: child_process (with dgram) is a tenth of a `gateway status` that never needs it.
    return process.getBuiltinModule('node:child_process').execFileSync('ps', ['-o', `${field}=`, '-p', String(pid)], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim() || undefined;
  } catch {
    return undefined;
  }
}

export function processState(pid: number): ProcessState {
  try {
    process.kill(pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ESRCH') return 'dead';
  }
  const state = process.platform === 'linux' ? procStat(pid)?.[0] : psField(pid, 'stat')?.[0];
  if (state === 'Z' || state === 'X') return 'zombie';
  return state === undefined && process.platform === 'linux' ? 'dead' : 'alive';
}

/** The start time of a process: clock ticks since boot on Linux, `ps lstart` elsewhere. */
export function processStartTime(pid: number): string | undefined {
  return process.platform === 'linux' ? procStat(pid)?.[19] : psField(pid, 'lstart');
}

export function readDaemonRecord(paths: ProfilePaths): DaemonRecord | 'corrupt' | undefined {
  let text: string;
  try {
    text = readFileSync(paths.lock, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  try {
    const record = JSON.parse(text) as DaemonRecord;
    if (Number.isInteger(record.pid) && record.pid > 0 && typeof record.instanceId === 'string') return record;
  } catch {
    // A torn or foreign file: treated as stale below.
  }
  return 'corrupt';
}

/** What the lock file says about the profile's daemon, checked against the live process table. */
export function inspectDaemon(paths: ProfilePaths): DaemonState {
  const record = readDaemonRecord(paths);
  if (record === undefined) return { state: 'stopped' };
  if (record === 'corrupt') {
    // A lock written a moment ago may still be empty; only an old one is stale.
    const age = Date.now() - (modifiedAt(paths.lock) ?? 0);
    return age < 2000 ? { state: 'stopped' } : { state: 'stale', reason: `${paths.lock} is not a valid lock file` };
  }
  const alive = processState(record.pid);
  if (alive === 'dead') return { state: 'stale', record, reason: `process ${record.pid} is gone` };
  if (alive === 'zombie') return { state: 'stale', record, reason: `process ${record.pid} has exited (zombie)` };
  const startTime = processStartTime(record.pid);
  if (startTime !== undefined && startTime !== record.startTime) {
    return { state: 'stale', record, reason: `pid ${record.pid} now belongs to another process` };
  }
  return { state: record.readyAt ? 'running' : 'starting', record };
}

/** When a file was last modified (ms), or undefined when there is none. */
export function modifiedAt(path: string): number | undefined {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return undefined;
  }
}

export class DaemonAlreadyRunning extends Error {
  readonly record: DaemonRecord;

  constructor(record: DaemonRecord) {
    super(`profile "${record.profile}" already has a daemon (pid ${record.pid})`);
    this.record = record;
  }
}

const RECLAIM_MUTEX_STALE_MS = 10_000;

/**
 * Takes the profile's lock: `daemon.json` created exclusively. A stale lock is
 * reclaimed under a short-lived mutex so that two reclaimers never remove each
 * other's fresh lock.
 */
export function acquireDaemonLock(paths: ProfilePaths, record: DaemonRecord): void {
  for (let attempt = 0; attempt < 20; attempt++) {
    try {
      writeFileSync(paths.lock, `${JSON.stringify(record, null, 2)}\n`, { flag: 'wx', mode: 0o600 });
      return;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== 'EEXIST') {
        // Created but not written (a full disk): the empty file must not stand for a lock.
        if (code !== 'EACCES' && code !== 'ENOENT') rmSync(paths.lock, { force: true });
        throw lockWriteError(paths, error as NodeJS.ErrnoException);
      }
    }
    const found = inspectDaemon(paths);
    if (found.state === 'running' || found.state === 'starting') throw new DaemonAlreadyRunning(found.record);
    if (found.state === 'stale') reclaimStaleLock(paths, found.record?.instanceId);
    else sleepSync(50);
  }
  throw new Error(`could not take ${paths.lock}: it keeps changing`);
}

function lockWriteError(paths: ProfilePaths, error: NodeJS.ErrnoException): GatewayError {
  const space = error.code === 'ENOSPC' || error.code === 'EDQUOT';
  return new GatewayError(`Cannot write ${paths.lock}: ${space ? 'no space is left on the device' : error.message}.`, {
    cause: error,
    hints: space ? [`free some space where the profile lives (df -h ${paths.dir}), then start again`] : [],
  });
}

function reclaimStaleLock(paths: ProfilePaths, staleInstance: string | undefined): void {
  const mutex = `${paths.lock}.reclaim`;
  try {
    writeFileSync(mutex, String(process.pid), { flag: 'wx', mode: 0o600 });
  } catch {
    if (Date.now() - (modifiedAt(mutex) ?? 0) > RECLAIM_MUTEX_STALE_MS) rmSync(mutex, { force: true });
    sleepSync(20);
    return;
  }
  try {
    const current = readDaemonRecord(paths);
    const currentInstance = current === 'corrupt' ? undefined : current?.instanceId;
    if (current !== undefined && currentInstance === staleInstance) rmSync(paths.lock, { force: true });
  } finally {
    rmSync(mutex, { force: true });
  }
}

/** Rewrites our own lock (for example to mark it ready), atomically. */
export function updateDaemonLock(paths: ProfilePaths, record: DaemonRecord): void {
  try {
    writeFileAtomic(paths.lock, `${JSON.stringify(record, null, 2)}\n`);
  } catch (error) {
    throw lockWriteError(paths, error as NodeJS.ErrnoException);
  }
}

/** Removes the lock if it is still ours. */
export function releaseDaemonLock(paths: ProfilePaths, instanceId: string): void {
  const current = readDaemonRecord(paths);
  if (current && current !== 'corrupt' && current.instanceId === instanceId) rmSync(paths.lock, { force: true });
}

/** Removes a lock that names no live daemon. */
export function removeStaleLock(paths: ProfilePaths): void {
  const found = inspectDaemon(paths);
  if (found.state === 'stale') reclaimStaleLock(paths, found.record?.instanceId);
}

const sleeper = new Int32Array(new SharedArrayBuffer(4));
export function sleepSync(ms: number): void {
  Atomics.wait(sleeper, 0, 0, ms);
}
